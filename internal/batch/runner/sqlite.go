package runner

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strings"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// runSQLite runs the script's statements one by one in one IMMEDIATE
// transaction (the write lock is taken at BEGIN, so the script never fails
// half-way upgrading a read lock). Each statement runs as a query and its
// rows are read to the end; outputs come from the first row of the last
// statement that returned rows, as for PostgreSQL.
func runSQLite(ctx context.Context, spec Spec, log io.Writer) Result {
	c := spec.Conn
	path := c.DSN
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return failed(fmt.Errorf("connection %s: %q is not a database file path", c.Name, path))
	}
	// A typo must not create an empty database the script then fails in.
	if _, err := os.Stat(path); err != nil {
		return failed(fmt.Errorf("connection %s: %w", c.Name, err))
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return failed(fmt.Errorf("connection %s: %w", c.Name, err))
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	ctx, cancel, timeoutCause := withTimeout(ctx, spec.Timeout)
	defer cancel()
	stopped := func(err error) Result {
		if stop := stopError(ctx, timeoutCause, "cancelled"); stop != nil {
			return failed(fmt.Errorf("%w: %w", stop, err))
		}
		return failed(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return stopped(fmt.Errorf("connection %s: begin: %w", c.Name, err))
	}
	defer tx.Rollback() // no-op after Commit
	var outputs map[string]string
	n := 0
	for _, group := range spec.statements() {
		stmts := splitSQLite(group.SQL)
		var args []any
		if len(group.Args) > 0 {
			if len(stmts) != 1 {
				// A parameter inside a CREATE TRIGGER body, which SQLite
				// reads as one statement.
				return failed(fmt.Errorf("line %d: a statement with parameters or outputs must be one statement, not %d: a trigger body cannot take parameters", group.Line, len(stmts)))
			}
			for _, a := range group.Args {
				args = append(args, a)
			}
		}
		for _, st := range stmts {
			n++
			line := st.line + max(group.Line, 1) - 1
			first, err := sqliteStatement(ctx, tx, n, st.text, log, args...)
			if err != nil {
				return stopped(fmt.Errorf("statement %d (line %d): %w", n, line, err))
			}
			if first != nil {
				outputs = first
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return stopped(fmt.Errorf("commit: %w", err))
	}
	return Result{Outputs: outputs}
}

// sqliteStatement runs one statement as a query, logs what it did, and
// returns its first row, if it returned any.
func sqliteStatement(ctx context.Context, tx *sql.Tx, n int, stmt string, log io.Writer, args ...any) (map[string]string, error) {
	var before int64
	if err := tx.QueryRowContext(ctx, "SELECT total_changes()").Scan(&before); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var first map[string]string
	count := 0
	for rows.Next() {
		if count == 0 && len(cols) > 0 {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			first = make(map[string]string, len(cols))
			for i, col := range cols {
				first[col] = vals[i].String // NULL is ""
			}
		}
		count++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(cols) > 0 {
		fmt.Fprintf(log, "statement %d: %d rows returned\n", n, count)
		return first, nil
	}
	var after int64
	if err := tx.QueryRowContext(ctx, "SELECT total_changes()").Scan(&after); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "statement %d: %d rows changed\n", n, after-before)
	return nil, nil
}

// sqliteStmt is one statement of a script, without its terminating ';'.
type sqliteStmt struct {
	text string
	line int // where its first token is, from 1
}

// splitSQLite splits a script into statements the way SQLite's
// sqlite3_complete reads it: ';' ends a statement unless it is inside a
// string, a quoted identifier or a comment, or inside the body of a CREATE
// TRIGGER, which ends with "END;". Statements with nothing but whitespace
// and comments are dropped.
func splitSQLite(script string) []sqliteStmt {
	// States and transitions of sqlite3_complete (SQLite's complete.c).
	const (
		sStart = iota + 1
		sNormal
		sExplain
		sCreate
		sTrigger
		sSemi
		sEnd
	)
	trans := [8][8]int{
		/* 0 unused */ {},
		/* start */ {sStart, sStart, sNormal, sExplain, sCreate, sNormal, sNormal, sNormal},
		/* normal */ {sStart, sNormal, sNormal, sNormal, sNormal, sNormal, sNormal, sNormal},
		/* explain */ {sStart, sExplain, sExplain, sNormal, sCreate, sNormal, sNormal, sNormal},
		/* create */ {sStart, sCreate, sNormal, sNormal, sNormal, sCreate, sTrigger, sNormal},
		/* trigger */ {sSemi, sTrigger, sTrigger, sTrigger, sTrigger, sTrigger, sTrigger, sTrigger},
		/* semi */ {sSemi, sSemi, sTrigger, sTrigger, sTrigger, sTrigger, sTrigger, sEnd},
		/* end */ {sStart, sEnd, sTrigger, sTrigger, sTrigger, sTrigger, sTrigger, sTrigger},
	}

	var out []sqliteStmt
	state := sStart
	start, line, firstLine := 0, 1, 0 // firstLine 0: no token yet
	flush := func(end int) {
		if firstLine != 0 {
			out = append(out, sqliteStmt{text: strings.Trim(script[start:end], " \t\n\r\f"), line: firstLine})
		}
		firstLine = 0
	}
	for i := 0; i < len(script); {
		c := script[i]
		j := i + 1 // end of the token
		tok := tOther
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			tok = tWS
		case c == '-' && j < len(script) && script[j] == '-':
			tok = tWS
			for j < len(script) && script[j] != '\n' {
				j++
			}
		case c == '/' && j < len(script) && script[j] == '*':
			tok = tWS
			if k := strings.Index(script[j+1:], "*/"); k >= 0 {
				j += 1 + k + 2
			} else {
				j = len(script)
			}
		case c == '\'' || c == '"' || c == '`' || c == '[':
			closer := c
			if c == '[' {
				closer = ']'
			}
			// A doubled quote inside is the quote itself: reading it as
			// the end of one string and the start of the next is the same.
			if k := strings.IndexByte(script[j:], closer); k >= 0 {
				j += k + 1
			} else {
				j = len(script)
			}
		case c == ';':
			tok = tSemi
		case isIDChar(c):
			for j < len(script) && isIDChar(script[j]) {
				j++
			}
			tok = keyword(script[i:j])
		}
		if tok != tWS && firstLine == 0 && tok != tSemi {
			firstLine = line
		}
		line += strings.Count(script[i:j], "\n")
		state = trans[state][tok]
		if tok == tSemi && state == sStart {
			flush(i)
			start = j
		}
		i = j
	}
	flush(len(script))
	return out
}

func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// Token classes of splitSQLite.
const (
	tSemi = iota
	tWS
	tOther
	tExplain
	tCreate
	tTemp
	tTrigger
	tEnd
)

func keyword(word string) int {
	switch strings.ToLower(word) {
	case "explain":
		return tExplain
	case "create":
		return tCreate
	case "temp", "temporary":
		return tTemp
	case "trigger":
		return tTrigger
	case "end":
		return tEnd
	}
	return tOther
}
