package pg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/pgserver"
)

var server *pgserver.Server

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m, &server)) }

var dbSeq atomic.Int64

// testDB creates a database, runs setup in it as the superuser, and
// returns its DSN and the superuser's connection to it.
func testDB(t testing.TB, setup string) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	dsn, err := server.CreateDatabase(ctx, fmt.Sprintf("pg%d", dbSeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	return dsn, conn
}

// openSource opens a Source on dsn that the test closes.
func openSource(t testing.TB, dsn string, timeouts ReadTimeouts) *Source {
	t.Helper()
	src, err := Open(context.Background(), Config{DSN: dsn, Publication: "p", Slot: "s", Timeouts: timeouts}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}
