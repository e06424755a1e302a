// Package doctor checks tidemark's prerequisites before the daemon runs:
// the source servers' settings and privileges, publications and replication
// slots, row keys, destinations, the metadata store, disk space, clocks and
// the connections of recurring tasks.
//
// It talks to every database directly, never to the daemon's API, so it
// works before `tidemark run` has ever started. Each check is a small
// function bounded by Timeout, so an unreachable host costs at most that
// long; the checks of different streams, the metadata store and each task
// connection run concurrently.
//
// The checks only read, with one exception: an existing metadata store is
// opened with store.Open, which brings its schema up to date as `tidemark
// run` would. A missing SQLite metadata file or destination is not created.
// No password appears in a Check: details name host, port, database and
// user only, and every configured password is scrubbed from them.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/config"
)

// Status is the outcome of a check.
type Status string

// Statuses. A WARN deserves a look; a FAIL keeps tidemark from working.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is the outcome of one check: what was found and, for WARN and FAIL,
// how to fix it (SQL to run or a configuration change).
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Timeout bounds each check's network and disk operations.
const Timeout = 5 * time.Second

// parallel is how many streams and connections are checked at once.
const parallel = 8

// Run checks everything cfg depends on and returns the checks in a stable
// order: the metadata store, each stream in file order, each task
// connection, the shell. It never returns an error: whatever goes wrong is
// a failed check. Run returns when every check has ended; cancelling ctx
// ends the pending ones (as failures) early.
func Run(ctx context.Context, cfg *config.Config) []Check {
	units := []func(context.Context) []Check{
		func(ctx context.Context) []Check { return checkMetadata(ctx, cfg) },
	}
	for i := range cfg.Streams {
		units = append(units, func(ctx context.Context) []Check { return checkStream(ctx, i, &cfg.Streams[i]) })
	}
	for i := range cfg.Connections {
		units = append(units, func(ctx context.Context) []Check { return checkConnection(ctx, i, &cfg.Connections[i]) })
	}
	if usesShell(cfg.Tasks) {
		units = append(units, func(ctx context.Context) []Check { return []Check{checkShell(ctx)} })
		units = append(units, func(context.Context) []Check { return checkTaskEnv(cfg) })
	}
	results := make([][]Check, len(units))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, u := range units {
		g.Go(func() error {
			results[i] = u(ctx)
			return nil
		})
	}
	_ = g.Wait()
	secrets := passwords(cfg)
	var out []Check
	for _, r := range results {
		for _, c := range r {
			c.Detail, c.Fix = scrub(c.Detail, secrets), scrub(c.Fix, secrets)
			out = append(out, c)
		}
	}
	return out
}

// Failed reports how many checks failed.
func Failed(checks []Check) int {
	n := 0
	for _, c := range checks {
		if c.Status == Fail {
			n++
		}
	}
	return n
}

func usesShell(tasks []dag.Task) bool {
	for _, t := range tasks {
		if t.Type == dag.TypeShell {
			return true
		}
	}
	return false
}

func ok(name, detail string) Check { return Check{Name: name, Status: OK, Detail: detail} }

func warn(name, detail, fix string) Check {
	return Check{Name: name, Status: Warn, Detail: detail, Fix: fix}
}

func fail(name, detail, fix string) Check {
	return Check{Name: name, Status: Fail, Detail: detail, Fix: fix}
}

// minSecret is the shortest password scrubbed from the output: replacing
// every "a" of a one-letter password would garble it and hide little.
const minSecret = 4

// passwords collects the passwords of every configured DSN.
func passwords(cfg *config.Config) []string {
	dsns := []string{cfg.Metadata}
	for _, s := range cfg.Streams {
		dsns = append(dsns, s.Source.DSN, s.Destination.DSN)
	}
	for _, c := range cfg.Connections {
		dsns = append(dsns, c.DSN)
	}
	var out []string
	for _, dsn := range dsns {
		if dsn == "" || !strings.Contains(dsn, "://") && !strings.Contains(dsn, "=") {
			continue
		}
		if pc, err := pgconn.ParseConfig(dsn); err == nil && len(pc.Password) >= minSecret {
			out = append(out, pc.Password)
		}
	}
	return out
}

// scrub replaces the secrets in s.
func scrub(s string, secrets []string) string {
	for _, p := range secrets {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// errText renders an error on one line. pgx puts each attempt (address,
// TLS then plain) on a line of its own, often the same line twice.
func errText(err error) string {
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line != "" && !slices.Contains(parts, line) {
			parts = append(parts, line)
		}
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			sep := "; "
			if strings.HasSuffix(parts[i-1], ":") {
				sep = " "
			}
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return b.String()
}

// errBadDSN is the error of a DSN that does not parse.
var errBadDSN = errors.New("cannot parse the DSN")

// pgConfig parses a PostgreSQL DSN for a connection named in application
// name tidemark-doctor. Its error never quotes the DSN: a parse error may
// hold it, password included.
func pgConfig(dsn string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errBadDSN
	}
	cc.RuntimeParams["application_name"] = "tidemark-doctor"
	return cc, nil
}

// connect opens a PostgreSQL connection within Timeout.
func connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cc, err := pgConfig(dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return nil, &connectError{msg: fmt.Sprintf("cannot connect to %s: no answer within %s", where(cc), Timeout), err: err}
	}
	if err != nil {
		// pgx's message repeats the user and database; what it wraps
		// says what went wrong at each address.
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) && errors.Unwrap(ce) != nil {
			err = errors.Unwrap(ce)
		}
		return nil, &connectError{msg: "cannot connect to " + where(cc) + ": " + errText(err), err: err}
	}
	return conn, nil
}

// connectError is a failed connection, its message on one line.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

// where names a server and database without the password.
func where(cc *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d/%s as %s", cc.Host, cc.Port, cc.Database, cc.User)
}

// closeConn closes a connection, bounded by Timeout.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn.Close(ctx)
}

// connectFix says what to do about a failed connection; key is the
// configuration key of the DSN.
func connectFix(err error, key string) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return "check the user and password in " + key + " and the server's pg_hba.conf"
	case errors.As(err, &pgErr) && pgErr.Code == "3D000":
		return "the database does not exist: fix the database name in " + key + " or create it (CREATE DATABASE)"
	case errors.As(err, &pgErr):
		return "fix " + key + " or the server's settings for this user"
	case errors.Is(err, errBadDSN):
		return "fix " + key + ": write postgres://user:password@host:5432/dbname, percent-encoding special characters"
	}
	return "check the host and port in " + key + ", that the server runs and listens there (listen_addresses, port) and that no firewall is in the way"
}
