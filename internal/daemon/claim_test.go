package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/stream"
)

// TestOneDaemonPerMetadataStore runs daemons as processes on one metadata
// store, SQLite and PostgreSQL: a second refuses to start naming the first
// (host, pid, since) and exits 1; once the first is SIGKILLed, a new one
// starts, and a further one refuses naming it. A daemon built without the
// claim (the demo's way) still opens the store meanwhile.
func TestOneDaemonPerMetadataStore(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			meta := "sqlite://" + filepath.Join(dir, "meta.db")
			if kind == "postgres" {
				var err error
				if meta, err = server.CreateDatabase(context.Background(), "claim_meta"); err != nil {
					t.Fatal(err)
				}
			}
			// The second daemon listens elsewhere: only the store is shared.
			cfgPath, addr := writeIdleConfig(t, dir, "first.yaml", meta)
			secondPath, _ := writeIdleConfig(t, dir, "second.yaml", meta)
			c := &crashEnv{t: t, ctx: context.Background(), cfgPath: cfgPath, addr: addr}
			c.start()
			c.waitAPI()
			refused(t, secondPath, c.cmd.Process.Pid)

			cfg, err := config.Load(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			d, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), stream.Options{})
			if err != nil {
				t.Fatalf("a daemon that does not claim the store (the demo's): %v", err)
			}
			d.close()

			c.kill()
			c.start()
			c.waitAPI()
			refused(t, secondPath, c.cmd.Process.Pid)
			c.stop()
		})
	}
}

// writeIdleConfig writes a configuration on the metadata store meta with
// one idle task and an API address of its own, and returns its path and
// that address.
func writeIdleConfig(t *testing.T, dir, name, meta string) (path, addr string) {
	t.Helper()
	path, addr = filepath.Join(dir, name), freeAddr(t)
	err := os.WriteFile(path, []byte(fmt.Sprintf(`
metadata: "%s"
api: {listen: "%s"}
tasks:
  - {name: idle, project: p, type: noop, schedule: daily}
`, meta, addr)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return path, addr
}

// refused runs one more daemon on the configuration and checks that it
// refuses to start, naming the daemon with pid holder. One that starts
// instead is killed after a minute.
func refused(t *testing.T, cfgPath string, holder int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+cfgPath)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second daemon: %v, want exit code 1; output:\n%s", err, out)
	}
	host, _ := os.Hostname()
	for _, want := range []string{"is in use by another tidemark daemon", "host " + host + ",",
		fmt.Sprintf("pid %d,", holder), "running since 20", "stop that one first"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second daemon's refusal lacks %q:\n%s", want, out)
		}
	}
}

// TestDaemonStopsWhenClaimLost: when the PostgreSQL session holding the
// claim ends (terminated here), the database has released the lock, so the
// daemon stops with the reason rather than run beside the next one.
func TestDaemonStopsWhenClaimLost(t *testing.T) {
	ctx := context.Background()
	meta, err := server.CreateDatabase(ctx, "claim_lost_meta")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := writeIdleConfig(t, t.TempDir(), "tidemark.yaml", meta)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, cfg, slog.New(slog.DiscardHandler), stream.Options{}, ClaimStore())
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	<-d.Ready
	conn, err := pgx.Connect(ctx, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'tidemark claim'`).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminate the claim's session: %d sessions, %v", n, err)
	}
	select {
	case err := <-ran:
		if err == nil || !strings.Contains(err.Error(), "lost the claim on the metadata store") {
			t.Errorf("Run ended with %v, want the lost claim", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the daemon still runs a minute after losing its claim")
	}
}
