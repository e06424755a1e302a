package bench

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver the sqlite destination uses
)

// sqliteInsertKey is the plain-INSERT baseline the sqlite destination is
// held against.
const sqliteInsertKey = "sqlite-insert"

// sqliteInsertSelect reads public.t as the sqlite destination stores it:
// integers natively, every other type as PostgreSQL's text form.
const sqliteInsertSelect = `SELECT id, customer_id, status, amount::text, note, payload::text, created_at::text, updated_at::text FROM public.t`

// runSQLiteInsert times the baseline of the sqlite destination: the same
// rows read from the source and inserted into a fresh file, into a table
// of the DDL the destination created, by one prepared INSERT in one
// transaction through the same driver with the destination's journal
// settings (WAL, synchronous FULL).
func (db *destBench) runSQLiteInsert() error {
	ddl, err := sqliteDDL(db.sqlite)
	if err != nil {
		return err
	}
	path := filepath.Join(db.b.TempDir(), "insert.db")
	lite, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return err
	}
	defer lite.Close()
	lite.SetMaxOpenConns(1)
	if _, err := lite.ExecContext(db.ctx, ddl); err != nil {
		return fmt.Errorf("plain INSERT baseline: create %s: %w", ddl, err)
	}
	conn, err := pgx.Connect(db.ctx, db.sv.src.DSN(srcDB))
	if err != nil {
		return fmt.Errorf("plain INSERT baseline: connect to source: %w", err)
	}
	defer conn.Close(db.ctx)
	r, err := db.timePipe(sqliteInsertKey, "plain INSERT into SQLite", "dest-sqlite", db.sv.dst.PID(),
		"source rows read with pgx, inserted by one prepared statement in one transaction",
		func() (int64, error) { return insertAll(db, conn, lite) })
	if err != nil {
		return err
	}
	held, what, err := sqliteHeld(path)
	if err != nil {
		return err
	}
	db.results = append(db.results, destResult{result: r, held: held, heldWhat: what})
	return nil
}

// timePipe times a baseline pipe of the same rows into what the
// destination named like writes to (whose bytes it reports, for
// comparable MB/s), served by process pid (for its CPU time); copyRows
// returns how many rows it copied.
func (db *destBench) timePipe(key, name, like string, pid int, note string, copyRows func() (int64, error)) (result, error) {
	if err := db.sv.checkpoint(db.ctx); err != nil {
		return result{}, err
	}
	r := result{key: key, name: name, rows: db.src.rows}
	if d, ok := findResult(db.plain(), like); ok {
		r.bytes = d.bytes
	}
	db.logf("%s …", r.name)
	r, err := timeRun(r, db.hwm, func() cpuTimes { return readCPUOf(db.sv.src.PID(), pid) }, func() (time.Duration, error) {
		start := time.Now()
		n, err := copyRows()
		switch {
		case err != nil:
			err = fmt.Errorf("%s: %w", name, err)
		case n != db.src.rows:
			err = fmt.Errorf("%s: copied %d rows, want %d", name, n, db.src.rows)
		}
		return time.Since(start), err
	})
	if err != nil {
		return r, err
	}
	r.note = note
	db.logf("%s: %.2fs, %.0f rows/s", r.name, r.elapsed.Seconds(), r.rowsPerSec())
	return r, nil
}

// insertAll copies public.t from the source into lite's table t.
func insertAll(db *destBench, conn *pgx.Conn, lite *sql.DB) (int64, error) {
	tx, err := lite.BeginTx(db.ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // no-op after Commit
	st, err := tx.PrepareContext(db.ctx, `INSERT INTO "t" VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	rows, err := conn.Query(db.ctx, sqliteInsertSelect)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return n, err
		}
		if _, err := st.ExecContext(db.ctx, vals...); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, tx.Commit()
}

// sqliteDDL is the CREATE TABLE of table t in the SQLite file at path.
func sqliteDDL(path string) (string, error) {
	lite, err := sql.Open("sqlite", path)
	if err != nil {
		return "", err
	}
	defer lite.Close()
	var ddl string
	if err := lite.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 't'`).Scan(&ddl); err != nil {
		return "", fmt.Errorf("the sqlite destination's table t: %w", err)
	}
	return ddl, nil
}

// sqliteHeld is the size of the SQLite file at path with its WAL.
func sqliteHeld(path string) (int64, string, error) {
	var size int64
	for _, p := range []string{path, path + "-wal"} {
		info, err := os.Stat(p)
		if err != nil && !os.IsNotExist(err) {
			return 0, "", err
		}
		if err == nil {
			size += info.Size()
		}
	}
	return size, "the SQLite file and its WAL (" + strings.TrimSuffix(filepath.Base(path), ".db") + ")", nil
}
