package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/pgserver"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // the destination types streams open
	_ "github.com/tidemark/tidemark/internal/source/all" // the source types the checks run

	"github.com/tidemark/tidemark/internal/store"
)

// server is the package's shared throwaway PostgreSQL; tests that need
// other server settings start their own.
var server *pgserver.Server

func TestMain(m *testing.M) {
	code := pgserver.RunTests(m, &server)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var seq atomic.Int64

// fixture is one test's source database on a server, with a name unique
// across the package for its stream (slots are per server).
type fixture struct {
	t    *testing.T
	ctx  context.Context
	srv  *pgserver.Server
	name string // stream name; the slot is tidemark_<name>
	dsn  string // the source database, as the superuser postgres
	conn *pgx.Conn
	dir  string
}

// setup creates a source database on srv (the shared server when nil) and
// runs sql in it.
func setup(t *testing.T, srv *pgserver.Server, sql string) *fixture {
	t.Helper()
	if srv == nil {
		srv = server
	}
	ctx := context.Background()
	f := &fixture{t: t, ctx: ctx, srv: srv, name: fmt.Sprintf("doc%d", seq.Add(1)), dir: t.TempDir()}
	var err error
	if f.dsn, err = srv.CreateDatabase(ctx, f.name); err != nil {
		t.Fatal(err)
	}
	if f.conn, err = pgx.Connect(ctx, f.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Slots outlive databases' connections: drop this test's.
		_, _ = f.conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", "tidemark_"+f.name)
		f.conn.Close(context.Background())
	})
	f.exec(sql)
	return f
}

func (f *fixture) exec(sql string) {
	f.t.Helper()
	if sql == "" {
		return
	}
	if _, err := f.conn.Exec(f.ctx, sql); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// userDSN is the source DSN as another user, with a password (the test
// servers trust every local connection, so any password is accepted).
func (f *fixture) userDSN(user, password string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", user, password, f.srv.Port, f.name)
}

// config builds a configuration of one stream named after the fixture,
// reading sourceDSN, with extra keys for the stream (one per line) and the
// file. The stream includes public.* and writes to a SQLite file in the
// test's directory unless streamYAML says otherwise.
func (f *fixture) config(sourceDSN, streamYAML, fileYAML string) *config.Config {
	f.t.Helper()
	if !strings.Contains(streamYAML, "include:") {
		streamYAML += "\ninclude: [\"public.*\"]"
	}
	if !strings.Contains(streamYAML, "destination:") {
		streamYAML += fmt.Sprintf("\ndestination: {type: sqlite, path: \"%s\"}", filepath.Join(f.dir, "dest.db"))
	}
	y := fmt.Sprintf(`
metadata: "sqlite://%s"
streams:
  - name: %s
    source: {dsn: "%s"}
%s
%s`, filepath.Join(f.dir, "meta.db"), f.name, sourceDSN, indent(streamYAML, "    "), fileYAML)
	cfg, err := config.Parse([]byte(y), nil)
	if err != nil {
		f.t.Fatalf("%v in\n%s", err, y)
	}
	return cfg
}

func indent(s, prefix string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, prefix+l)
		}
	}
	return strings.Join(lines, "\n")
}

// run runs the doctor and logs its checks.
func run(t *testing.T, cfg *config.Config) []Check {
	t.Helper()
	checks := Run(context.Background(), cfg)
	for _, c := range checks {
		t.Logf("%-4s %s: %s", c.Status, c.Name, c.Detail)
		if c.Fix != "" {
			t.Logf("     fix: %s", c.Fix)
		}
	}
	return checks
}

// find returns the check whose name ends with suffix.
func find(t *testing.T, checks []Check, suffix string) Check {
	t.Helper()
	for _, c := range checks {
		if strings.HasSuffix(c.Name, suffix) {
			return c
		}
	}
	t.Fatalf("no check named …%s", suffix)
	return Check{}
}

// expect finds a check and verifies its status and that its detail and fix
// together contain each of want.
func expect(t *testing.T, checks []Check, suffix string, status Status, want ...string) Check {
	t.Helper()
	c := find(t, checks, suffix)
	if c.Status != status {
		t.Errorf("%s: %s (%s), want %s", c.Name, c.Status, c.Detail, status)
	}
	for _, w := range want {
		if !strings.Contains(c.Detail+"\n"+c.Fix, w) {
			t.Errorf("%s: %q / fix %q, want %q in it", c.Name, c.Detail, c.Fix, w)
		}
	}
	return c
}

func noFail(t *testing.T, checks []Check) {
	t.Helper()
	for _, c := range checks {
		if c.Status == Fail {
			t.Errorf("%s failed: %s (fix: %s)", c.Name, c.Detail, c.Fix)
		}
	}
}

func parse(y string) (*config.Config, error) { return config.Parse([]byte(y), nil) }

func openStore(t *testing.T, url string) (interface{ Close() error }, error) {
	t.Helper()
	return store.Open(context.Background(), url)
}
