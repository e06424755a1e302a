// Package pgserver starts throwaway PostgreSQL servers with the settings
// logical replication needs. Tests and the demo use it; nothing else does.
//
// A server runs as the "postgres" system user (initdb refuses root) from a
// data directory of its own under the system temp dir, listens on a private
// Unix socket and a free loopback port, and never reads the caller's PG*
// environment. It is stopped by PID: explicitly with Stop, and by the kernel
// (parent-death signal) if the process that started it dies, for example when
// a test panics.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/throwaway"
)

// Server is one running throwaway PostgreSQL instance.
type Server struct {
	Dir  string // data directory, owned by the postgres user
	Port int
	proc *throwaway.Process
}

// Options tune a server. The zero value is what CDC tests need.
type Options struct {
	// Settings are extra `-c name=value` server settings.
	Settings map[string]string
}

// BinDir finds the newest installed PostgreSQL server binaries.
func BinDir() (string, error) {
	if d := os.Getenv("TIDEMARK_PG_BINDIR"); d != "" {
		return d, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: install them with `apt-get install postgresql` (scripts/setup.sh does)")
	}
	sort.Slice(matches, func(i, j int) bool { return majorOf(matches[i]) > majorOf(matches[j]) })
	return filepath.Dir(matches[0]), nil
}

func majorOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start initialises a fresh data directory and starts a server on it. The
// server runs until Stop is called or the calling process exits.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	throwaway.SweepStale("tidemark-pg-", "data/postmaster.pid")
	dir, cred, err := throwaway.Dir("tidemark-pg-", "postgres", "apt-get install postgresql")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	data := filepath.Join(dir, "data")
	if err := initdb(ctx, bin, data, cred); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := throwaway.FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.Port = port
	args := append([]string{"-D", data}, settingArgs(dir, port, opts.Settings)...)
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Env = cleanEnv()
	// Pdeathsig is applied after the credential change, so it survives it:
	// if this process dies (a panicking test), the kernel kills the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if s.proc, err = throwaway.Launch(cmd, filepath.Join(dir, "server.log")); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func initdb(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	return nil
}

// settingArgs renders the server settings CDC tests need, with overrides,
// as sorted -c arguments.
func settingArgs(dir string, port int, overrides map[string]string) []string {
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(port),
		"unix_socket_directories": dir,
		"wal_level":               "logical",
		"max_wal_senders":         "20",
		"max_replication_slots":   "20",
		"fsync":                   "off",
		"full_page_writes":        "off",
		"synchronous_commit":      "on",
		"shared_buffers":          "128MB",
		"max_connections":         "100",
		"wal_sender_timeout":      "60s",
		"log_min_messages":        "warning",
		"logging_collector":       "off",
	}
	for k, v := range overrides {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	return args
}

func (s *Server) waitReady(ctx context.Context) error {
	return s.proc.WaitReady(ctx, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
		}
		return err
	})
}

// DSN returns a URL for the given database over the loopback port.
func (s *Server) DSN(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, database)
}

// PID is the postmaster's process id.
func (s *Server) PID() int { return s.proc.PID() }

// CreateDatabase creates a database and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// AddPasswordRole creates a superuser role that must log in over TCP with
// its password (scram-sha-256), where every other role is trusted, and
// returns a DSN for database as that role with the password given, which
// may be a wrong one. The DSN leaves sslmode at its default, prefer, as a
// user's would. role and password are letters and digits.
func (s *Server) AddPasswordRole(ctx context.Context, role, password, given, database string) (string, error) {
	for _, v := range []string{role, password, given} {
		if !plainWord.MatchString(v) {
			return "", fmt.Errorf("role and passwords must be letters and digits, not %q", v)
		}
	}
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	rules, err := os.ReadFile(hba)
	if err != nil {
		return "", err
	}
	// The first matching line decides, so the role's goes in front.
	line := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\n", role)
	if err := os.WriteFile(hba, append([]byte(line), rules...), 0o600); err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	create := fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", pgx.Identifier{role}.Sanitize(), password)
	if _, err := conn.Exec(ctx, create); err != nil {
		return "", fmt.Errorf("create role %s: %w", role, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return "", err
	}
	// The postmaster reloads pg_hba.conf when it gets to the signal: wait
	// until a wrong password is refused.
	probe := fmt.Sprintf("postgres://%s:not%s@127.0.0.1:%d/postgres?sslmode=disable", role, password, s.Port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(ctx, probe)
		if err != nil {
			break
		}
		c.Close(ctx)
		if time.Now().After(deadline) {
			return "", fmt.Errorf("pg_hba.conf: %s still logs in without its password after 30s", role)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s", role, given, s.Port, database), nil
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9]+$`)

// Stop shuts the server down (fast mode), waits for it by PID and removes its
// directory. It is safe to call more than once.
func (s *Server) Stop() {
	if s == nil || s.proc == nil {
		return
	}
	s.proc.Stop(syscall.SIGINT)
	os.RemoveAll(s.Dir)
}

// Restart stops the server (immediate mode, like a crash when crash is true)
// and starts it again on the same directory and port.
func (s *Server) Restart(ctx context.Context, crash bool) error {
	sig := syscall.SIGINT
	if crash {
		sig = syscall.SIGQUIT
	}
	s.proc.Signal(sig)
	old := s.proc.Cmd()
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Env = old.Env
	cmd.SysProcAttr = old.SysProcAttr
	p, err := throwaway.Launch(cmd, filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	s.proc = p
	return s.waitReady(ctx)
}

// ScrubEnv removes PG* variables from this process's environment so that no
// client library picks up the caller's PGHOST, PGOPTIONS, PGTZ and the like.
// Test mains call it before starting servers.
func ScrubEnv() {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			os.Unsetenv(kv[:strings.IndexByte(kv, '=')])
		}
	}
}

// cleanEnv keeps the caller's PG* variables from leaking into the server.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C.UTF-8")
}

// RunTests runs a test package's tests against one throwaway server, set in
// *srv before they start, and returns the exit code for os.Exit. The server
// is stopped before returning, and by the kernel if a test panics.
func RunTests(m interface{ Run() int }, srv **Server) int {
	ScrubEnv()
	s, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start a throwaway PostgreSQL server:", err)
		return 1
	}
	*srv = s
	code := m.Run()
	s.Stop()
	return code
}
