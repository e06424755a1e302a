package mysql

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/mysqlserver"
	_ "github.com/tidemark/tidemark/internal/sink/all" // the destinations configurations name
)

var server *mysqlserver.Server

func TestMain(m *testing.M) { os.Exit(mysqlserver.RunTests(m, &server)) }

var dbSeq atomic.Int64

// testDB creates a database, runs the setup statements in it as root (UTC,
// utf8mb4), and returns a Source on it as the tidemark account and the
// root connection.
func testDB(t *testing.T, setup ...string) (*Source, *client.Conn) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("db%d", dbSeq.Add(1))
	dsn, err := server.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	root := rootConn(t, name)
	for _, q := range setup {
		if _, err := root.Execute(q); err != nil {
			t.Fatalf("setup %q: %v", q, err)
		}
	}
	src, err := Open(ctx, Config{DSN: dsn, ServerID: 1000 + uint32(dbSeq.Load())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src, root
}

func rootConn(t *testing.T, db string) *client.Conn {
	t.Helper()
	c, err := server.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, q := range []string{"SET NAMES utf8mb4", "SET time_zone = '+00:00'", "USE " + quoteIdent(db)} {
		if _, err := c.Execute(q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func exec(t *testing.T, c *client.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
