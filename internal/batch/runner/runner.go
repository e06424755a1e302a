package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Task types.
const (
	TypeShell = "shell"
	TypeSQL   = "sql"
	TypeNoop  = "noop"
)

// Connection types.
const (
	ConnPostgres = "postgres" // DSN is a postgres:// URL or a keyword/value string
	ConnSQLite   = "sqlite"   // DSN is the path of an existing database file
)

// Connection is a configured database a SQL task runs against.
type Connection struct {
	Name string
	Type string // ConnPostgres or ConnSQLite
	DSN  string
}

// Spec is one attempt of a task instance, fully rendered.
type Spec struct {
	Type   string // TypeShell, TypeSQL or TypeNoop
	Script string // shell: run with /bin/sh -c; sql: statements, run in one transaction
	// Env is a shell task's whole environment, KEY=VALUE entries; later
	// entries win. Nothing of the daemon's environment is added: the caller
	// passes what the task may see. TIDEMARK_OUTPUT is set by Run.
	Env []string
	// Dir is a shell task's working directory; "" is the daemon's.
	Dir  string
	Conn *Connection // sql
	// Statements, when set, replace Script for a SQL task whose template
	// had parameters or outputs: each with Args is one statement sent with
	// those parameters ($1… for PostgreSQL, ?1… for SQLite), the others are
	// run as a Script is.
	Statements []Statement
	// Timeout bounds the attempt; 0 is none.
	Timeout time.Duration
	// Tag identifies the attempt, unique per attempt and per daemon (for
	// example "tidemark-i123-a2-5f0c9e1a2b3d"). A PostgreSQL session carries it as its
	// application_name so that CancelSQL, from another process, can find it.
	// At most 63 printable ASCII characters, PostgreSQL's limit.
	Tag string
}

// Statement is SQL with the values of its parameters, as text.
type Statement struct {
	SQL  string
	Args []string
	Line int // where it starts in the task's SQL, from 1
}

// statements returns what a SQL attempt runs.
func (s Spec) statements() []Statement {
	if len(s.Statements) > 0 {
		return s.Statements
	}
	return []Statement{{SQL: s.Script, Line: 1}}
}

// Result is how an attempt ended.
type Result struct {
	// Outputs are the output parameters the attempt produced; nil when it
	// failed.
	Outputs map[string]string
	// ExitCode is a shell task's exit status; -1 when the script was killed
	// by a signal or did not run. SQL and noop tasks report 0 on success
	// and -1 on failure.
	ExitCode int
	// Err is nil on success, else why the attempt failed: "exit status 3",
	// "killed by timeout after 30s", "cancelled", a SQL error with its
	// SQLSTATE. Test for ErrTimeout and ErrCancelled with errors.Is.
	Err error
}

var (
	// ErrTimeout reports an attempt stopped because it ran longer than
	// Spec.Timeout.
	ErrTimeout = errors.New("timeout")
	// ErrCancelled reports an attempt stopped because Run's context ended.
	ErrCancelled = errors.New("cancelled")
	// ErrLapsed reports a shell task ended by its watchdog because the
	// daemon did not move its deadline on in time (WatchTasks): the
	// daemon was frozen or its node cut off from the metadata store. The
	// task did not fail; its node may be lost (the deadline comes a
	// little before its leases expire).
	ErrLapsed = errors.New("its node's watchdog deadline passed")
)

// Run executes one attempt and returns how it ended. Its output (a shell
// script's stdout and stderr, a SQL script's command tags and notices) goes
// to log, which may be nil.
//
// For a shell task, started (which may be nil) is called right after the
// process has started with the identity of its process group, so that the
// caller can record it and end the group after a crash (EndProcessGroup).
// If started returns an error, Run kills the group and returns that error.
// started is not called for other task types.
//
// Run returns only once the attempt and everything it started have ended;
// see the package documentation for cancellation and timeouts.
func Run(ctx context.Context, spec Spec, log *Log, started func(Proc) error) Result {
	if spec.Type == TypeNoop {
		return Result{}
	}
	var w io.Writer = io.Discard
	if log != nil {
		w = log
	}
	switch spec.Type {
	case TypeShell:
		return runShell(ctx, spec, w, started)
	case TypeSQL:
		return runSQL(ctx, spec, w)
	default:
		return failed(fmt.Errorf("unknown task type %q (want %s, %s or %s)", spec.Type, TypeShell, TypeSQL, TypeNoop))
	}
}

func failed(err error) Result { return Result{ExitCode: -1, Err: err} }

// withTimeout derives the attempt's context. The returned cause is what
// context.Cause reports when the timeout, not the parent, ended it.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc, error) {
	if d <= 0 {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	cause := fmt.Errorf("%w after %s", ErrTimeout, d)
	ctx, cancel := context.WithTimeoutCause(ctx, d, cause)
	return ctx, cancel, cause
}

// stopError says why ctx, derived by withTimeout, ended: "<verb> by timeout
// after 30s" or "cancelled"; nil if it has not.
func stopError(ctx context.Context, timeoutCause error, verb string) error {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return nil
	case timeoutCause != nil && cause == timeoutCause:
		return fmt.Errorf("%s by %w", verb, timeoutCause)
	default:
		return cancelled(cause)
	}
}

// cancelled wraps the cause of a parent context's end in ErrCancelled.
func cancelled(cause error) error {
	if cause == nil || cause == context.Canceled {
		return ErrCancelled
	}
	return fmt.Errorf("%w: %w", ErrCancelled, cause)
}
