package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink/postgres"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// dsnFuzzConfig is a configuration whose every DSN the fuzz test replaces.
const dsnFuzzConfig = `
api: {listen: "127.0.0.1:0"}
streams:
  - name: shop
    source: {dsn: "postgres://db/shop"}
    destination: {type: postgres, dsn: "postgres://db/replica"}
    include: ["public.*"]
    retry: {initial: 10ms, max: 20ms}
connections:
  - {name: warehouse, type: postgres, dsn: "postgres://db/warehouse"}
tasks:
  - {name: load, type: sql, connection: warehouse, sql: "SELECT 1", schedule: daily}
`

// FuzzDSNToRunningDaemon puts one string in every DSN of a configuration
// (source, destination, metadata, task connection). What validation refuses
// must be a list of problems; what it accepts must reach every part that
// parses or connects with it — the metadata store, a running daemon's
// stream, the destination, a SQL task and its cancellation — and come back
// as an error or a connection, never a panic.
func FuzzDSNToRunningDaemon(f *testing.F) {
	for _, s := range []string{
		"postgres://u:pw@127.0.0.1:99999/db", // pgx's error wraps nothing
		"postgres://u:pw@127.0.0.1:0/db",
		"postgres://127.0.0.1:1/db",
		"postgres://[::1]:65535/db",
		"postgres://127.0.0.1/db?port=99999",
		"postgres://127.0.0.1:5,127.0.0.1:65536/db",
		"postgres://127.0.0.1:1/db?sslmode=bogus",
		"postgres://127.0.0.1:1/db?connect_timeout=soon",
		"postgres://127.0.0.1:1/db?target_session_attrs=x`: y",
		"postgresql://%zz@127.0.0.1:1/db",
		"postgres://u:p%ss@127.0.0.1:1/db",
		"postgres://127.0.0.1:1/db?host=",
		"postgres://[::1/db",
		"postgres:///db",
		server.DSN("no_such_database"),
	} {
		f.Add(s)
	}
	base, err := config.Parse([]byte(dsnFuzzConfig), nil)
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, dsn string) {
		cfg := *base
		cfg.Streams = append([]config.Stream(nil), base.Streams...)
		cfg.Connections = append([]config.Connection(nil), base.Connections...)
		cfg.Metadata = dsn
		cfg.Streams[0].Source.DSN = dsn
		cfg.Streams[0].Destination.DSN = dsn
		cfg.Connections[0].DSN = dsn
		if err := cfg.Validate(); err != nil {
			if ve, ok := errors.AsType[*config.ValidationError](err); !ok || len(ve.Problems) == 0 {
				t.Fatalf("error %T %v is no *ValidationError with problems", err, err)
			}
			return
		}
		// Each part gets a short time to connect, and none may panic.
		short := func() context.Context {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}
		if st, err := store.Open(short(), dsn); err == nil {
			st.Close()
		}
		if snk, err := postgres.Open(short(), dsn); err == nil {
			snk.Close()
		}
		conn := runner.Connection{Name: "warehouse", Type: runner.ConnPostgres, DSN: dsn}
		runner.Run(short(), runner.Spec{Type: runner.TypeSQL, Script: "SELECT 1", Conn: &conn, Tag: "tidemark-fuzz"}, nil, nil)
		_, _ = runner.CancelSQL(short(), conn, "tidemark-fuzz")

		// Not t.TempDir: a seed's directory name holds a '#'.
		dir, err := os.MkdirTemp("", "tidemark-fuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		cfg.Metadata = "sqlite://" + filepath.Join(dir, "meta.db")
		d, err := New(t.Context(), &cfg, log, stream.Options{})
		if err != nil {
			t.Fatalf("a valid configuration does not build a daemon: %v", err)
		}
		// The stream connects, fails and retries until the context ends.
		if err := d.Run(short()); err != nil {
			t.Logf("run: %v", err)
		}
	})
}
