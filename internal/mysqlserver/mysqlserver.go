// Package mysqlserver starts throwaway MariaDB servers with the settings
// binlog replication needs. Tests use it; nothing else does.
//
// A server runs as the "mysql" system user from a data directory of its own
// under the system temp dir (mariadb-install-db, --no-defaults, so nothing of
// the machine's my.cnf is read), listens on a private Unix socket and a free
// loopback port, and writes a row-based binlog with full images and full
// metadata. It is stopped by PID: explicitly with Stop, and by the kernel
// (parent-death signal) if the process that started it dies, for example
// when a test panics. The machine's own server (port 3306) is never touched.
package mysqlserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/throwaway"
)

// User and Password are the account every server gets, with the grants
// tidemark's MySQL source needs: REPLICATION SLAVE, REPLICATION CLIENT and
// SELECT on every database.
const (
	User     = "tidemark"
	Password = "tidemark-test"
)

// Server is one running throwaway MariaDB instance.
type Server struct {
	Dir  string // owned by the mysql user; data/ holds the data and the binlog
	Port int
	proc *throwaway.Process
}

// Options tune a server. The zero value is what CDC tests need.
type Options struct {
	// Settings override or add server options, given without the leading
	// dashes ("binlog-format": "STATEMENT"). An empty value leaves the
	// option out altogether ("log-bin": "" starts without a binlog).
	Settings map[string]string
}

// binaries finds mariadbd and mariadb-install-db.
func binaries() (server, install string, err error) {
	server, err = exec.LookPath("mariadbd")
	if err != nil {
		if server, err = exec.LookPath("/usr/sbin/mariadbd"); err != nil {
			return "", "", errors.New("no mariadbd: install MariaDB with `apt-get install mariadb-server mariadb-client` (scripts/setup.sh does)")
		}
	}
	install, err = exec.LookPath("mariadb-install-db")
	if err != nil {
		return "", "", errors.New("no mariadb-install-db: install MariaDB with `apt-get install mariadb-server` (scripts/setup.sh does)")
	}
	return server, install, nil
}

// Start initialises a fresh data directory and starts a server on it, with
// the tidemark account created. The server runs until Stop is called or the
// calling process exits.
func Start(ctx context.Context, opts Options) (*Server, error) {
	serverBin, installBin, err := binaries()
	if err != nil {
		return nil, err
	}
	throwaway.SweepStale("tidemark-mysql-", "mariadbd.pid")
	dir, cred, err := throwaway.Dir("tidemark-mysql-", "mysql", "apt-get install mariadb-server")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	// A temp dir of its own: servers bootstrapping at once in a shared
	// /tmp have been seen to delete each other's temporary tables.
	if err := os.Mkdir(s.tmpDir(), 0o700); err == nil {
		err = throwaway.Chown(s.tmpDir(), cred)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create the server's temp dir: %w", err)
	}
	if err := s.install(ctx, installBin, cred); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if s.Port, err = throwaway.FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.launch(serverBin, cred, opts.Settings); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.createUser(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) install(ctx context.Context, bin string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, bin, "--no-defaults", "--datadir="+s.dataDir(),
		"--user=mysql", "--auth-root-authentication-method=normal", "--skip-test-db",
		"--skip-name-resolve", "--tmpdir="+s.tmpDir())
	cmd.Dir = s.Dir
	cmd.Env = append(cleanEnv(), "TMPDIR="+s.tmpDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %w: %s", err, out)
	}
	return nil
}

func (s *Server) launch(bin string, cred *syscall.Credential, overrides map[string]string) error {
	cmd := exec.Command(bin, s.args(overrides)...)
	cmd.Dir = s.Dir
	cmd.Env = cleanEnv()
	// Pdeathsig is applied after the credential change, so it survives it:
	// if this process dies (a panicking test), the kernel kills the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p, err := throwaway.Launch(cmd, filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// args renders the server options CDC tests need, with overrides, sorted;
// --no-defaults must come first.
func (s *Server) args(overrides map[string]string) []string {
	settings := map[string]string{
		"datadir":                        s.dataDir(),
		"socket":                         s.Socket(),
		"pid-file":                       filepath.Join(s.Dir, "mariadbd.pid"),
		"port":                           strconv.Itoa(s.Port),
		"bind-address":                   "127.0.0.1",
		"skip-name-resolve":              "ON",
		"log-bin":                        filepath.Join(s.dataDir(), "mysql-bin"),
		"binlog-format":                  "ROW",
		"binlog-row-image":               "FULL",
		"binlog-row-metadata":            "FULL",
		"server-id":                      "1",
		"character-set-server":           "utf8mb4",
		"collation-server":               "utf8mb4_general_ci",
		"innodb-buffer-pool-size":        "64M",
		"innodb-flush-log-at-trx-commit": "2",
		"sync-binlog":                    "0",
		"max-allowed-packet":             "64M",
		"max-connections":                "100",
		"log-error":                      filepath.Join(s.Dir, "error.log"),
		// Not the shared /tmp: another server (or a sweep of /tmp) must not
		// touch this one's temporary tables.
		"tmpdir": s.tmpDir(),
	}
	for k, v := range overrides {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k, v := range settings {
		if v != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	args := []string{"--no-defaults"}
	for _, k := range keys {
		args = append(args, "--"+k+"="+settings[k])
	}
	return args
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }

func (s *Server) tmpDir() string { return filepath.Join(s.Dir, "tmp") }

// Socket is the server's private Unix socket.
func (s *Server) Socket() string { return filepath.Join(s.Dir, "mysqld.sock") }

// Addr is the server's loopback host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// PID is the server's process id.
func (s *Server) PID() int { return s.proc.PID() }

// DSN returns a mysql:// URL for the tidemark account and the database.
func (s *Server) DSN(database string) string {
	u := url.URL{Scheme: "mysql", User: url.UserPassword(User, Password), Host: s.Addr(), Path: "/" + database}
	return u.String()
}

// Root connects as the server's root account (no password, loopback), for
// tests that set up tables, accounts and data.
func (s *Server) Root(ctx context.Context) (*client.Conn, error) {
	c, err := client.ConnectWithContext(ctx, s.Addr(), "root", "", "", 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connect to the throwaway MariaDB as root: %w", err)
	}
	return c, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	return s.proc.WaitReady(ctx, func(ctx context.Context) error {
		c, err := s.Root(ctx)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (s *Server) createUser() error {
	c, err := s.Root(context.Background())
	if err != nil {
		return err
	}
	defer c.Close()
	for _, q := range []string{
		"CREATE USER '" + User + "'@'%' IDENTIFIED BY '" + Password + "'",
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '" + User + "'@'%'",
	} {
		if _, err := c.Execute(q); err != nil {
			return fmt.Errorf("create the %s account: %w", User, err)
		}
	}
	return nil
}

// CreateDatabase creates a database (utf8mb4, the server's default
// collation) and returns the tidemark account's DSN for it.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	c, err := s.Root(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Execute("CREATE DATABASE " + QuoteIdent(name)); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// Exec runs statements one by one as root in database db ("": none), and
// stops at the first that fails.
func (s *Server) Exec(ctx context.Context, db string, stmts ...string) error {
	c, err := s.Root(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if db != "" {
		stmts = append([]string{"USE " + QuoteIdent(db)}, stmts...)
	}
	for _, q := range stmts {
		if _, err := c.Execute(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// ForTest starts a server of the test's own, stopped when the test ends,
// creates database db and runs the setup statements in it as root; it
// returns the server and the tidemark account's DSN for db.
func ForTest(t testing.TB, opts Options, db string, setup ...string) (*Server, string) {
	t.Helper()
	ctx := context.Background()
	srv, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dsn, err := srv.CreateDatabase(ctx, db)
	if err == nil {
		err = srv.Exec(ctx, db, setup...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return srv, dsn
}

// QuoteIdent quotes a MySQL identifier with backticks, doubling any inside.
func QuoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// Stop shuts the server down (SIGTERM: a clean shutdown), waits for it by
// PID, kills it after 30 s, and removes its directory. It is safe to call
// more than once.
func (s *Server) Stop() {
	if s == nil || s.proc == nil {
		return
	}
	s.proc.Stop(syscall.SIGTERM)
	os.RemoveAll(s.Dir)
}

// Restart stops the server and starts it again by PID on the same data
// directory, socket and port: a clean shutdown (SIGTERM), or a crash
// (SIGKILL: InnoDB recovers at start-up) when crash is true. Connections
// to the old process fail; new ones succeed once Restart returns.
func (s *Server) Restart(ctx context.Context, crash bool) error {
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	s.proc.Stop(sig)
	old := s.proc.Cmd()
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.SysProcAttr = old.Dir, old.Env, old.SysProcAttr
	p, err := throwaway.Launch(cmd, filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return fmt.Errorf("restart mariadbd: %w", err)
	}
	s.proc = p
	return s.waitReady(ctx)
}

// cleanEnv keeps the caller's MYSQL_* variables (MYSQL_PWD, MYSQL_HOST,
// MYSQL_TCP_PORT, …) from reaching the server's tools.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MYSQL") || strings.HasPrefix(kv, "MARIADB") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C.UTF-8", "TZ=UTC")
}

// RunTests runs a test package's tests against one throwaway server, set in
// *srv before they start, and returns the exit code for os.Exit. The server
// is stopped before returning, and by the kernel if a test panics.
func RunTests(m interface{ Run() int }, srv **Server) int {
	s, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start a throwaway MariaDB server:", err)
		return 1
	}
	*srv = s
	code := m.Run()
	s.Stop()
	return code
}
