package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// TestWrongPasswordSaysSo: a source DSN with a wrong password reads as a
// wrong password in doctor and in the failed stream's reason (not as the
// TLS attempt sslmode=prefer makes first), the reason says what to run
// once it is fixed, and running it after the fix gets the stream going.
func TestWrongPasswordSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	dsn, err := srv.AddPasswordRole(ctx, "alice", "right", "wrong", "shop")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, addr := sqliteConfig(t, fmt.Sprintf(`{dsn: "%s", status_interval: 1s}`, dsn), "{}")

	r := expect(t, 1, nil, "doctor", "-c", cfg)
	for _, want := range []string{`FAIL  stream s: source`, `password authentication failed for user "alice"`, "check the user and password"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor: want %q in\n%s", want, r.stdout)
		}
	}
	if strings.Contains(strings.ToLower(r.stdout), "tls") || strings.Contains(r.stdout, "wrong") {
		t.Errorf("doctor speaks of TLS or shows the password:\n%s", r.stdout)
	}

	d := startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon.log"))
	stream := func() api.StreamView { return theStream(t, addr) }
	var failed api.StreamView
	poll(t, d, "stream s failed", func() bool { failed = stream(); return failed.State == store.StateFailed })
	for _, want := range []string{`password authentication failed for user "alice"`, "the server refused this user or password", "`tidemark stream resume s`"} {
		if !strings.Contains(failed.Reason, want) {
			t.Errorf("failed reason %q: want %q in it", failed.Reason, want)
		}
	}
	if strings.Contains(strings.ToLower(failed.Reason), "tls") || strings.Contains(failed.Reason, "wrong") {
		t.Errorf("failed reason %q speaks of TLS or shows the password", failed.Reason)
	}

	// The DBA sets the password the DSN has; resume is all it takes.
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER ROLE alice PASSWORD 'wrong'"); err != nil {
		t.Fatal(err)
	}
	if r := tidemark(t, append(addr, "stream", "resume", "s")...); r.code != 0 {
		t.Fatalf("stream resume s: %s", r)
	}
	poll(t, d, "stream s running after the resume", func() bool { return stream().State == store.StateRunning })
}
