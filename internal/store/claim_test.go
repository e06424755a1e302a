package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/store"
)

// TestClaim: one claim per store at a time; a second is refused naming the
// holder, and is granted once the first is released. Opening the store
// without claiming it (doctor, the CLI's helpers) stays possible meanwhile.
func TestClaim(t *testing.T) {
	for name, newURL := range map[string]func(*testing.T) string{"sqlite": sqliteURL, "postgres": postgresURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := newURL(t)
			a, b := openURL(t, url), openURL(t, url)
			ca, err := a.Claim(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Claim(ctx)
			var claimed *store.ClaimedError
			if !errors.As(err, &claimed) || claimed.Holder == nil {
				t.Fatalf("second claim: %v, want a *store.ClaimedError naming the holder", err)
			}
			host, _ := os.Hostname()
			if h := claimed.Holder; h.PID != os.Getpid() || h.Host != host || time.Since(h.Since) > time.Minute {
				t.Errorf("holder = %+v, want pid %d on %s since just now", *h, os.Getpid(), host)
			}
			for _, want := range []string{"in use by another tidemark daemon", "pid ", "running since", "stop that one first"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q lacks %q", err, want)
				}
			}
			if _, err := b.ListStreams(ctx); err != nil {
				t.Errorf("reading a claimed store: %v", err)
			}
			if err := ca.Release(); err != nil {
				t.Fatal(err)
			}
			cb, err := b.Claim(ctx)
			if err != nil {
				t.Fatalf("claim after release: %v", err)
			}
			if err := cb.Release(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestClaimLost: a claim whose hold ends without Release — the PostgreSQL
// session holding the advisory lock is terminated, or the SQLite lock file
// is removed — reports itself lost, and the store can be claimed again.
func TestClaimLost(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		url := postgresURL(t)
		s := openURL(t, url)
		c, err := s.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		conn, err := pgx.Connect(ctx, url)
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
		waitLost(t, c, "connection holding it failed")
		c2, err := openURL(t, url).Claim(ctx)
		if err != nil {
			t.Fatalf("claim after the holder's session ended: %v", err)
		}
		c2.Release()
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		url := sqliteURL(t)
		s := openURL(t, url)
		c, err := s.Claim(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if err := os.Remove(strings.TrimPrefix(url, "sqlite://") + ".lock"); err != nil {
			t.Fatal(err)
		}
		waitLost(t, c, ".lock")
	})
}

func waitLost(t *testing.T, c *store.Claim, want string) {
	t.Helper()
	select {
	case <-c.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("the claim was not reported lost within 15 s")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("lost claim's error = %v, want one mentioning %q", err, want)
	}
}

func openURL(t *testing.T, url string) *store.Store {
	t.Helper()
	s, err := store.Open(context.WithoutCancel(t.Context()), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestClaimThroughLink: a SQLite store reached through a symbolic link is
// the same store, claimed once.
func TestClaimThroughLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real, link := filepath.Join(dir, "meta.db"), filepath.Join(dir, "link.db")
	a := openURL(t, "sqlite://"+real)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Release()
	var claimed *store.ClaimedError
	if _, err := openURL(t, "sqlite://"+link).Claim(t.Context()); !errors.As(err, &claimed) {
		t.Fatalf("claim through a link to a claimed store: %v, want a *store.ClaimedError", err)
	}
}
