package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// runSQL runs a SQL task's script in one transaction.
func runSQL(ctx context.Context, spec Spec, log io.Writer) Result {
	c := spec.Conn
	if c == nil {
		return failed(errors.New("sql task without a connection"))
	}
	switch c.Type {
	case ConnPostgres:
		if err := checkTag(spec.Tag); err != nil {
			return failed(err)
		}
		return runPostgres(ctx, spec, log)
	case ConnSQLite:
		return runSQLite(ctx, spec, log)
	default:
		return failed(fmt.Errorf("connection %s: unknown type %q (want %s or %s)", c.Name, c.Type, ConnPostgres, ConnSQLite))
	}
}

// checkTag makes sure a tag reaches pg_stat_activity unchanged: PostgreSQL
// truncates application_name to 63 bytes and replaces non-ASCII characters.
func checkTag(tag string) error {
	if len(tag) > 63 {
		return fmt.Errorf("tag %q: longer than 63 bytes", tag)
	}
	for i := 0; i < len(tag); i++ {
		if tag[i] < 0x20 || tag[i] > 0x7e {
			return fmt.Errorf("tag %q: not printable ASCII", tag)
		}
	}
	return nil
}

// runPostgres runs the script with the simple protocol, so that it may hold
// several statements, between a BEGIN and a COMMIT sent separately: a
// session whose daemon died mid-script never commits. Outputs come from the
// first row of the last result set that had rows.
func runPostgres(ctx context.Context, spec Spec, log io.Writer) Result {
	c := spec.Conn
	cfg, err := pgconn.ParseConfig(c.DSN)
	if err != nil {
		return failed(fmt.Errorf("connection %s: %w", c.Name, err))
	}
	if spec.Tag != "" {
		cfg.RuntimeParams["application_name"] = spec.Tag
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		fmt.Fprintf(log, "%s: %s\n", n.Severity, n.Message)
	}
	// On cancellation, ask the server to cancel the running statement (the
	// default only closes the socket, which a busy backend does not notice),
	// and drop the connection if it has not answered within GracePeriod.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: GracePeriod}
	}

	ctx, cancel, timeoutCause := withTimeout(ctx, spec.Timeout)
	defer cancel()
	stopped := func(err error) Result {
		if stop := stopError(ctx, timeoutCause, "cancelled"); stop != nil {
			return failed(fmt.Errorf("%w: %w", stop, err))
		}
		return failed(err)
	}

	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return stopped(fmt.Errorf("connection %s: %w", c.Name, err))
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), GracePeriod)
		defer cancel()
		conn.Close(closeCtx)
		<-conn.CleanupDone() // a connection broken by cancellation closes in the background
	}()
	if _, err := conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return stopped(fmt.Errorf("connection %s: begin: %w", c.Name, err))
	}
	outputs, err := execStatements(ctx, conn, spec.statements(), log)
	if err != nil {
		// Roll back before returning, so that the transaction's locks are
		// gone when the caller retries. A connection broken by cancellation
		// is closed instead, which rolls back on the server.
		if !conn.IsClosed() {
			rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), GracePeriod)
			_, _ = conn.Exec(rbCtx, "ROLLBACK").ReadAll()
			cancel()
		}
		return stopped(err)
	}
	// COMMIT after a script that ended the transaction itself would only
	// warn: check that ours is still open.
	if conn.TxStatus() != 'T' {
		return failed(errors.New("the script ended the transaction itself: SQL tasks may not use COMMIT or ROLLBACK"))
	}
	if _, err := conn.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		return stopped(fmt.Errorf("commit: %w", err))
	}
	return Result{Outputs: outputs}
}

// scriptRun is what running a script's statements has found so far.
type scriptRun struct {
	n       int // statements run
	endTx   int // the first that ended the transaction; 0 if none
	outputs map[string]string
}

// execStatements runs statements in order and logs each statement's
// command tag: text without arguments with the simple protocol (it may hold
// several statements), a statement with arguments with the extended
// protocol, its arguments bound as text of a type the server infers.
func execStatements(ctx context.Context, conn *pgconn.PgConn, stmts []Statement, log io.Writer) (map[string]string, error) {
	var run scriptRun
	for _, st := range stmts {
		if len(st.Args) == 0 {
			mrr := conn.Exec(ctx, st.SQL)
			for mrr.NextResult() {
				if err := run.result(mrr.ResultReader(), log); err != nil {
					break // mrr.Close reports it
				}
			}
			if err := mrr.Close(); err != nil {
				return nil, fmt.Errorf("statement %d%s: %w", run.n+1, errorLine(st, err), err)
			}
			continue
		}
		args := make([][]byte, len(st.Args))
		for i, a := range st.Args {
			args[i] = []byte(a)
		}
		if err := run.result(conn.ExecParams(ctx, st.SQL, args, nil, nil, nil), log); err != nil {
			return nil, fmt.Errorf("statement %d%s: %w", run.n+1, errorLine(st, err), err)
		}
	}
	if run.endTx > 0 {
		// Too late to undo a COMMIT, but the attempt must not pass for one
		// transaction.
		return nil, fmt.Errorf("statement %d: SQL tasks may not use BEGIN, COMMIT or ROLLBACK: the script runs in one transaction", run.endTx)
	}
	return run.outputs, nil
}

// result reads one statement's result: its first row becomes the outputs
// if it has one.
func (run *scriptRun) result(rr *pgconn.ResultReader, log io.Writer) error {
	fields := rr.FieldDescriptions()
	var first map[string]string
	for rr.NextRow() {
		if first == nil && len(fields) > 0 {
			first = make(map[string]string, len(fields))
			for i, v := range rr.Values() {
				first[fields[i].Name] = string(v) // text format; NULL is ""
			}
		}
	}
	tag, err := rr.Close()
	if err != nil {
		return err
	}
	run.n++
	if first != nil {
		run.outputs = first
	}
	if s := tag.String(); s != "" {
		fmt.Fprintf(log, "statement %d: %s\n", run.n, s)
	}
	switch tag.String() {
	case "BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "PREPARE TRANSACTION":
		if run.endTx == 0 {
			run.endTx = run.n
		}
	}
	return nil
}

// errorLine renders where in the task's SQL a server error points, if it
// says.
func errorLine(st Statement, err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Position <= 0 {
		return ""
	}
	line, chars := max(st.Line, 1), 0
	for _, r := range st.SQL {
		chars++
		if chars >= int(pgErr.Position) {
			break
		}
		if r == '\n' {
			line++
		}
	}
	return fmt.Sprintf(" (line %d)", line)
}

// CancelSQL terminates every session of conn whose application_name is tag
// (the sessions of the attempt Spec.Tag named, possibly left by a daemon
// that died) and waits until they are gone, so that their transactions have
// rolled back. It returns how many sessions it terminated. A SQLite
// connection has no sessions that outlive the process: 0, nil.
func CancelSQL(ctx context.Context, conn Connection, tag string) (int, error) {
	switch conn.Type {
	case ConnSQLite:
		return 0, nil
	case ConnPostgres:
	default:
		return 0, fmt.Errorf("connection %s: unknown type %q", conn.Name, conn.Type)
	}
	if tag == "" {
		return 0, errors.New("cancel sessions: empty tag")
	}
	if err := checkTag(tag); err != nil {
		return 0, err
	}
	cfg, err := pgx.ParseConfig(conn.DSN)
	if err != nil {
		return 0, fmt.Errorf("connection %s: %w", conn.Name, err)
	}
	cfg.RuntimeParams["application_name"] = "tidemark-cancel"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("connection %s: %w", conn.Name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	var n int
	err = c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, tag).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("connection %s: terminate sessions %q: %w", conn.Name, tag, err)
	}
	// pg_terminate_backend only signals; wait for the backends to exit.
	deadline := time.Now().Add(reapTimeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		var left int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()`, tag).Scan(&left)
		if err != nil {
			return n, fmt.Errorf("connection %s: wait for sessions %q to end: %w", conn.Name, tag, err)
		}
		if left == 0 {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("connection %s: %d sessions %q still present %s after termination", conn.Name, left, tag, reapTimeout)
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("connection %s: wait for sessions %q to end: %w", conn.Name, tag, context.Cause(ctx))
		case <-time.After(pause):
		}
	}
}
