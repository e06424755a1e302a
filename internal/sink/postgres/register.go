package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/genexpr"
	"github.com/tidemark/tidemark/internal/sink"
)

func init() {
	sink.Register(sink.Type{
		Name:      config.TypePostgres,
		Title:     "PostgreSQL",
		Generated: genexpr.PostgreSQL,
		Keys:      []string{"dsn"},
		Validate: func(v *config.Checker, p string, d *config.Destination) {
			v.PostgresDSN(p+".dsn", d.DSN, "the destination database")
		},
		Open: func(ctx context.Context, d config.Destination) (sink.Sink, error) {
			return Open(ctx, d.DSN)
		},
		Doctor:  doctor,
		Example: (*Sink)(nil),
	})
}

// The capabilities of a PostgreSQL destination: all of them.
var (
	_ sink.TableCreator   = (*Sink)(nil)
	_ sink.RangeReplacer  = (*Sink)(nil)
	_ sink.Reader         = (*Sink)(nil)
	_ sink.Alterer        = (*Sink)(nil)
	_ sink.ChangeReporter = (*Sink)(nil)
)

// ReplacesRanges declares that Apply replaces a chunk's range in place.
func (s *Sink) ReplacesRanges() {}

// ReportsChanges declares that Apply notes what tracked chunks change and
// calls BeforeCommit.
func (s *Sink) ReportsChanges() {}

// checkpointSQL reads a stream's position and resume token without
// creating anything. The token is read as a field of the row: a checkpoint
// table from before tokens were stored has no such column.
const checkpointSQL = `SELECT "position", coalesce(to_jsonb(c) ->> 'resume', '')
	FROM "_tidemark"."checkpoint" c WHERE "stream" = $1`

// doctor connects, checks that tidemark may create its schema, and reads
// the stream's checkpoint.
func doctor(ctx context.Context, in sink.DoctorInput) sink.DoctorReport {
	c, cp := checkDestination(ctx, in)
	cp.Checks = []check.Check{c}
	return cp
}

// checkDestination returns the destination's check, and the report's
// checkpoint.
func checkDestination(ctx context.Context, in sink.DoctorInput) (check.Check, sink.DoctorReport) {
	name := "stream " + in.Stream + ": destination"
	key := in.Key
	conn, err := check.ConnectPostgres(ctx, in.Destination.DSN)
	if err != nil {
		return check.Failed(name, check.ErrText(err), check.PostgresConnectFix(err, key+".dsn")), sink.DoctorReport{}
	}
	defer check.ClosePostgres(conn)
	ctx, cancel := context.WithTimeout(ctx, check.Timeout)
	defer cancel()
	var version, db, user string
	var schema, canCreate bool
	err = conn.QueryRow(ctx, `
		SELECT current_setting('server_version'), current_database()::text, current_user::text,
		       EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '_tidemark'),
		       has_database_privilege(current_database(), 'CREATE')`).Scan(&version, &db, &user, &schema, &canCreate)
	if err != nil {
		return check.Failed(name, "connected, but cannot query: "+check.ErrText(err), check.PostgresConnectFix(err, key+".dsn")), sink.DoctorReport{}
	}
	at := fmt.Sprintf("%s (PostgreSQL %s)", check.Where(conn.Config()), version)
	if !schema && !canCreate {
		return check.Failed(name, fmt.Sprintf("%s: %s lacks CREATE on database %s, which creating tidemark's schema _tidemark needs", at, user, db),
			fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s;", quote(db), quote(user))), sink.DoctorReport{Known: true}
	}
	var pos int64
	cp := sink.DoctorReport{Known: true}
	err = conn.QueryRow(ctx, checkpointSQL, in.Stream).Scan(&pos, &cp.Resume)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"):
	default:
		return check.Failed(name, fmt.Sprintf("%s: cannot read the stream's checkpoint: %s", at, check.ErrText(err)), ""), sink.DoctorReport{}
	}
	cp.Position = change.LSN(uint64(pos))
	return check.Passed(name, "connected to "+at+"; "+in.Position(cp.Position, cp.Resume)), cp
}
