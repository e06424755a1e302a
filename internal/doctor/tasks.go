package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/tidemark/tidemark/internal/config"
)

// checkConnection checks that connections[i], a database sql tasks run
// against, is reachable.
func checkConnection(ctx context.Context, i int, c *config.Connection) []Check {
	name := "connection " + c.Name
	key := fmt.Sprintf("connections[%d]", i)
	switch c.Type {
	case config.TypePostgres:
		conn, err := connect(ctx, c.DSN)
		if err != nil {
			return []Check{fail(name, errText(err), connectFix(err, key+".dsn"))}
		}
		defer closeConn(conn)
		ctx, cancel := context.WithTimeout(ctx, Timeout)
		defer cancel()
		var version string
		if err := conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&version); err != nil {
			return []Check{fail(name, "connected, but cannot query: "+errText(err), connectFix(err, key+".dsn"))}
		}
		return []Check{ok(name, fmt.Sprintf("connected to %s (PostgreSQL %s)", where(conn.Config()), version))}
	case config.TypeSQLite:
		return []Check{sqliteConnection(ctx, name, key, c.Path)}
	}
	return []Check{fail(name, fmt.Sprintf("connection type %q is not supported", c.Type), "set "+key+".type to postgres or sqlite")}
}

// sqliteConnection checks a SQLite connection: sql tasks need the file to
// exist (they never create it).
func sqliteConnection(ctx context.Context, name, key, path string) Check {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fail(name, path+" does not exist; sql tasks never create their database", "create the database file, or correct "+key+".path")
	} else if err != nil {
		return fail(name, errText(err), "correct "+key+".path")
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	db, err := openSQLite(path)
	if err != nil {
		return fail(name, errText(err), "correct "+key+".path")
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		return fail(name, fmt.Sprintf("%s: %s", path, errText(err)), "correct "+key+".path: it must be a SQLite database")
	}
	return ok(name, fmt.Sprintf("%s is a SQLite database (%d schema objects)", path, n))
}

// checkShell checks that shell tasks can run: they run with /bin/sh -c.
func checkShell(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := exec.CommandContext(ctx, "/bin/sh", "-c", "exit 0").Run(); err != nil {
		return fail("shell", "/bin/sh cannot run: "+errText(err), "install a POSIX shell at /bin/sh: shell tasks run with /bin/sh -c")
	}
	return ok("shell", "/bin/sh runs (shell tasks use it)")
}
