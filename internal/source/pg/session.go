package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// sessionParams are the settings every source connection starts with: the
// pool's and the replication connection's (docs/config.md lists them).
// Values reach tidemark as the server's text output, and pgoutput prints
// them with the walsender's settings, so these pin everything that output
// depends on, and the source and destination texts compare equal.
// Startup parameters outrank the role's and the database's defaults (ALTER
// ROLE … SET, ALTER DATABASE … SET), and are what RESET and DISCARD ALL go
// back to.
var sessionParams = map[string]string{
	"TimeZone":                    "UTC",
	"DateStyle":                   "ISO, MDY",
	"IntervalStyle":               "postgres",
	"extra_float_digits":          "1", // any value above 0 prints the shortest exact text
	"bytea_output":                "hex",
	"client_encoding":             "UTF8",
	"standard_conforming_strings": "on", // a backslash in a literal of tidemark's SQL is a backslash
	// PostgreSQL's default, pinned: format_type, and the text of reg*
	// values, leave out the schema of what it finds.
	"search_path":      `"$user", public`,
	"application_name": "tidemark",
}

// withSessionParams sets the session parameters on a connection's config.
func withSessionParams(params map[string]string) {
	for k, v := range sessionParams {
		params[k] = v
	}
}

// resetTimeout bounds the reset of a connection returned to the pool and
// the rollback of a read.
const resetTimeout = 5 * time.Second

// resetSession clears whatever a connection's session holds when it goes
// back to the pool, and reports whether it may be reused (pgxpool's
// AfterRelease). Reads are transactions that are rolled back, which undoes
// SET, set_config(…, false) and temporary tables made in them; but session
// advisory locks, prepared statements, LISTEN registrations and cursors
// WITH HOLD outlive a rollback, and SQL that runs in a read (a function the
// source calls, say) can take them. DISCARD ALL drops all of that and sets
// every setting back to its startup value, sessionParams. Resetting on
// release, not on acquire, frees a lock as soon as the read ends rather
// than when the connection is next used. (The pool runs its queries as
// unnamed statements, QueryExecModeCacheDescribe, so DISCARD ALL drops no
// statement pgx would use again.)
func resetSession(conn *pgx.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	_, err := conn.PgConn().Exec(ctx, "DISCARD ALL").ReadAll()
	return err == nil
}
