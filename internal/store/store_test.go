package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/store/storetest"
)

// One throwaway PostgreSQL server for the whole package; one database per test.
var (
	pgSrv *pgserver.Server
	pgErr error
	pgDBs atomic.Int64
)

func TestMain(m *testing.M) {
	pgserver.ScrubEnv()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pgSrv, pgErr = pgserver.Start(ctx, pgserver.Options{})
	cancel()
	code := m.Run()
	pgSrv.Stop() // nil-safe; stops the server before the leak check and exit
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func sqliteURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "meta.db")
}

func postgresURL(t *testing.T) string {
	t.Helper()
	return newPostgresDB(t)
}

// newPostgresDB creates a fresh database on the package's server and
// returns its URL.
func newPostgresDB(tb testing.TB) string {
	tb.Helper()
	if pgErr != nil {
		tb.Fatalf("throwaway PostgreSQL server: %v", pgErr)
	}
	dsn, err := pgSrv.CreateDatabase(tb.Context(), fmt.Sprintf("store_%d", pgDBs.Add(1)))
	if err != nil {
		tb.Fatal(err)
	}
	return dsn
}

func opener(newURL func(*testing.T) string) func(t *testing.T) *store.Store {
	return func(t *testing.T) *store.Store {
		t.Helper()
		s, err := store.Open(t.Context(), newURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	}
}

func TestSQLite(t *testing.T) {
	t.Run("Suite", func(t *testing.T) { storetest.Run(t, opener(sqliteURL)) })
	t.Run("Reopen", func(t *testing.T) { storetest.RunReopen(t, sqliteURL) })
	t.Run("Migrations", func(t *testing.T) { testMigrations(t, "sqlite", sqliteURL) })
}

func TestPostgres(t *testing.T) {
	t.Run("Suite", func(t *testing.T) { storetest.Run(t, opener(postgresURL)) })
	t.Run("Reopen", func(t *testing.T) { storetest.RunReopen(t, postgresURL) })
	t.Run("Migrations", func(t *testing.T) { testMigrations(t, "postgres", postgresURL) })
}

// testMigrations checks schema_migrations bookkeeping: every embedded
// migration recorded once, nothing re-applied on re-open, and a database
// from a newer tidemark refused.
func testMigrations(t *testing.T, dialect string, newURL func(*testing.T) string) {
	ctx := t.Context()
	url := newURL(t)
	for i := range 3 {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if s.Dialect() != dialect {
			t.Errorf("Dialect() = %q, want %q", s.Dialect(), dialect)
		}
		n, err := store.QueryString(ctx, s, `SELECT CAST(COUNT(*) AS TEXT) FROM "schema_migrations"`)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint(store.MigrationCount(dialect)); n != want {
			t.Errorf("open %d: %s rows in schema_migrations, want %s", i, n, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	// Pretend a newer tidemark applied migration 9999 (applied_at copied, as
	// its column type differs between dialects).
	if err := store.Exec(ctx, s, `INSERT INTO "schema_migrations" ("version", "name", "applied_at") SELECT ?, ?, "applied_at" FROM "schema_migrations" WHERE "version" = 1`,
		9999, "from_the_future"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := store.Open(ctx, url); err == nil {
		s.Close()
		t.Fatal("opening a database with a newer schema succeeded")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Errorf("newer schema: err = %v", err)
	}
}

func TestSQLitePragmas(t *testing.T) {
	s := opener(sqliteURL)(t)
	ctx := t.Context()
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"foreign_keys": "1",
		"busy_timeout": "10000",
		"cache_size":   "-65536",
		"temp_store":   "2",
	} {
		got, err := store.QueryString(ctx, s, "PRAGMA "+pragma)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

func TestOpenSQLiteURLForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ctx := t.Context()
	for _, tc := range []struct{ url, file string }{
		{"sqlite://" + filepath.Join(dir, "abs.db"), "abs.db"}, // sqlite:///abs/path.db
		{"sqlite://rel.db", "rel.db"},
		{"plain.db", "plain.db"},
		{filepath.Join(dir, "plain-abs.db"), "plain-abs.db"},
		{"SQLITE://upper.db", "upper.db"},
	} {
		s, err := store.Open(ctx, tc.url)
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		if s.Dialect() != "sqlite" {
			t.Errorf("Open(%q).Dialect() = %q", tc.url, s.Dialect())
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(dir, tc.file)); err != nil {
			t.Errorf("Open(%q) did not create %s: %v", tc.url, tc.file, err)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	ctx := t.Context()
	for _, url := range []string{
		"",
		"   ",
		"mysql://user@host/db",
		"sqlite://",
		"sqlite:rel.db",
		"postgres:db",
		"sqlite://x.db?mode=ro",
		"sqlite://:memory:",
		"host=localhost dbname=tidemark",
		filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"),
		"postgres://tidemark:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5",
	} {
		s, err := store.Open(ctx, url)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %v", url, err)
		}
		if strings.HasPrefix(url, "postgres://") || strings.Contains(url, "/no/such/") {
			continue // connection errors, not URL errors
		}
		if !strings.Contains(msg, "sqlite:///abs/path.db") || !strings.Contains(msg, "postgres://") {
			t.Errorf("Open(%q) error does not list the accepted forms: %v", url, err)
		}
	}
}

func TestRebind(t *testing.T) {
	q := `SELECT "a?" FROM t WHERE x = ? AND y = 'it''s ?' AND z IN (?, ?)`
	if got, want := store.Rebind("postgres", q), `SELECT "a?" FROM t WHERE x = $1 AND y = 'it''s ?' AND z IN ($2, $3)`; got != want {
		t.Errorf("postgres rebind = %s, want %s", got, want)
	}
	if got := store.Rebind("sqlite", q); got != q {
		t.Errorf("sqlite rebind changed the query: %s", got)
	}
}

// SQLite keeps times as fixed-width UTC RFC 3339 text, so they sort as text.
func TestSQLiteTimeText(t *testing.T) {
	s := opener(sqliteURL)(t)
	ctx := t.Context()
	at := time.Date(2024, 3, 10, 1, 4, 5, 500_000_000, time.FixedZone("X", 3600))
	if err := s.PutStream(ctx, store.StreamState{Name: "s", State: store.StateRunning, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	got, err := store.QueryString(ctx, s, `SELECT "updated_at" FROM "streams" WHERE "name" = ?`, "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := "2024-03-10T00:04:05.500000000Z"; got != want {
		t.Errorf("stored updated_at = %q, want %q", got, want)
	}
}
