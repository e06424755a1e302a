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
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/source"
)

// Status is the outcome of a check.
type Status = check.Status

// Statuses. A WARN deserves a look; a FAIL keeps tidemark from working.
const (
	OK   = check.OK
	Warn = check.Warn
	Fail = check.Fail
)

// Check is the outcome of one check: what was found and, for WARN and FAIL,
// how to fix it (SQL to run or a configuration change).
type Check = check.Check

// Timeout bounds each check's network and disk operations.
const Timeout = check.Timeout

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

func ok(name, detail string) Check { return check.Passed(name, detail) }

func warn(name, detail, fix string) Check { return check.Warned(name, detail, fix) }

func fail(name, detail, fix string) Check { return check.Failed(name, detail, fix) }

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

// The shared wording and PostgreSQL connection helpers, under the names
// the checks here use.
var (
	errText    = check.ErrText
	connect    = check.ConnectPostgres
	closeConn  = check.ClosePostgres
	connectFix = check.PostgresConnectFix
	where      = check.Where
	pgConfig   = check.PostgresConfig
	errBadDSN  = check.ErrBadDSN
)

// checkStream runs the checks of streams[i]: its source, through its
// type's registered checks, then its destination. The source's log checks
// read the destination's checkpoint, so the destination is looked at first.
func checkStream(ctx context.Context, i int, s *config.Stream) []Check {
	dest, cp := checkDestination(ctx, i, s)
	key := fmt.Sprintf("streams[%d]", i)
	typ, err := source.Lookup(s.Source.Type)
	if err != nil {
		return append([]Check{fail("stream "+s.Name+": source", err.Error(), "set "+key+".source.type to a supported type")}, dest...)
	}
	in := source.DoctorInput{Stream: s, Key: key, Checkpoint: source.Checkpoint{Known: cp.known, Position: cp.position}}
	return append(typ.Doctor(ctx, in), dest...)
}

// checkpoint is the position the destination committed for the stream.
type checkpoint struct {
	known    bool // false when the destination could not be read
	position change.LSN
	resume   string // the source's resume token (MySQL: its GTID state)
}

// BytesText renders a byte count in binary units.
func BytesText(n int64) string { return check.BytesText(n) }
