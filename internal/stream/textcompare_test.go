package stream

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// textSettings are the session settings the source and the PostgreSQL
// destination run with (docs/type-mapping.md). Tests read both sides with
// them so that the texts compare; the test connection e.src does not, since
// it keeps the server's defaults.
var textSettings = map[string]string{
	"TimeZone":           "UTC",
	"DateStyle":          "ISO, MDY",
	"IntervalStyle":      "postgres",
	"extra_float_digits": "1",
	"bytea_output":       "hex",
	"client_encoding":    "UTF8",
}

// textConn connects to dsn with textSettings.
func (e *env) textConn(dsn string) *pgx.Conn {
	e.t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range textSettings {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// readText reads every row of t from a PostgreSQL database in key order,
// each value as the server's text output (the destination's table has the
// source table's name and columns).
func (e *env) readText(conn *pgx.Conn, t *change.Table) []change.Row {
	e.t.Helper()
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = pgx.Identifier{c.Name}.Sanitize()
	}
	keys := make([]string, len(t.Key))
	for i, c := range t.KeyColumns() {
		keys[i] = pgx.Identifier{c.Name}.Sanitize()
	}
	sql := "SELECT " + strings.Join(cols, ", ") + " FROM " + pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize() +
		" ORDER BY " + strings.Join(keys, ", ")
	// nil result formats: text, as the source and the sink read values.
	res := conn.PgConn().ExecParams(e.ctx, sql, nil, nil, nil, nil).Read()
	if res.Err != nil {
		e.t.Fatalf("read %s: %v", t.ID, res.Err)
	}
	rows := make([]change.Row, len(res.Rows))
	for i, raw := range res.Rows {
		rows[i] = make(change.Row, len(raw))
		for j, v := range raw {
			if v == nil {
				rows[i][j] = change.Null
			} else {
				rows[i][j] = change.Text(string(v))
			}
		}
	}
	return rows
}

// diffText compares rows value by value and describes up to ten
// differences, naming key and column.
func diffText(t *change.Table, want, got []change.Row) string {
	byKey := make(map[string]change.Row, len(got))
	for _, r := range got {
		byKey[t.RowKey(r).Encode()] = r
	}
	var problems []string
	for _, w := range want {
		k := t.RowKey(w)
		g, ok := byKey[k.Encode()]
		delete(byKey, k.Encode())
		if !ok {
			problems = append(problems, fmt.Sprintf("key %v missing", keyText(k)))
			continue
		}
		for i, c := range t.Columns {
			if w[i].Null != g[i].Null || w[i].Unchanged != g[i].Unchanged || w[i].Text != g[i].Text {
				problems = append(problems, fmt.Sprintf("key %v column %s (%s): got %s, want %s",
					keyText(k), c.Name, c.Type, shortValue(g[i]), shortValue(w[i])))
			}
		}
	}
	for _, g := range byKey {
		problems = append(problems, fmt.Sprintf("extra key %v", keyText(t.RowKey(g))))
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("… %d differences in all", len(problems)))
	}
	return strings.Join(problems, "\n")
}

// shortValue quotes a value for a message, eliding the middle of long ones.
func shortValue(v change.Value) string {
	if v.Null || v.Unchanged {
		return v.String()
	}
	s := v.Text
	if len(s) > 120 {
		head, tail := s[:60], s[len(s)-40:]
		for !utf8.ValidString(head) {
			head = head[:len(head)-1]
		}
		for !utf8.ValidString(tail) {
			tail = tail[1:]
		}
		return fmt.Sprintf("%q…(%d bytes)…%q", head, len(s), tail)
	}
	return strconv.Quote(s)
}

// destRows reads all of t's rows back through the destination sink.
func (e *env) destRows(t *change.Table) []change.Row {
	e.t.Helper()
	rows, err := e.openDest().ReadRange(e.ctx, t, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

// barrier commits row n of table barrier on the source and waits until the
// destination has it: the destination applies transactions in commit order,
// so every earlier write is then applied too, and comparisons made after it
// need no retrying (a wrong value fails at once instead of timing out).
func (e *env) barrier(n int) {
	e.t.Helper()
	e.exec("INSERT INTO barrier VALUES ($1)", n)
	tbl := e.s.lookup(change.TableID{Schema: "public", Name: "barrier"})
	if tbl == nil {
		e.t.Fatal("table barrier is not streamed")
	}
	snk := e.openDest()
	want := strconv.Itoa(n)
	e.waitFor("barrier "+want+" in the destination", func() bool {
		// A batch the destination refuses is retried, or fails the
		// stream: report it now rather than after the timeout.
		if st := e.s.State(); st.State == store.StateRetrying || st.State == store.StateFailed {
			e.t.Fatalf("waiting for barrier %s: the stream is %s: %s", want, st.State, st.Reason)
		}
		rows, err := snk.ReadRange(e.ctx, tbl, change.Key{change.Text(strconv.Itoa(n - 1))}, change.Key{change.Text(want)})
		if err != nil {
			e.t.Fatal(err)
		}
		return len(rows) == 1
	})
}

// verifyClean runs the stream's verify over every object and fails on any
// difference.
func (e *env) verifyClean(chunkSize int) {
	e.t.Helper()
	checks, err := e.s.Verify(e.ctx, nil, chunkSize)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(checks) == 0 {
		e.t.Fatal("verify checked no object")
	}
	for _, c := range checks {
		if c.Error != "" || !c.Match || c.SourceRows != c.DestRows {
			var bad []RangeCheck
			for _, r := range c.Ranges {
				if !r.Match {
					bad = append(bad, r)
				}
			}
			e.t.Errorf("verify of %s: match=%v rows %d/%d error %q; differing ranges %+v",
				c.Object, c.Match, c.SourceRows, c.DestRows, c.Error, bad)
		}
	}
}

// sqliteStored is how docs/type-mapping.md stores a source value in SQLite:
// the storage class typeof() reports and the value the driver reads.
func sqliteStored(c change.Column, v change.Value) (string, any) {
	if v.Null {
		return "null", nil
	}
	switch c.BaseOID {
	case 20, 21, 23: // bigint, smallint, integer
		n, _ := strconv.ParseInt(v.Text, 10, 64)
		return "integer", n
	case 16: // boolean
		if v.Text == "t" {
			return "integer", int64(1)
		}
		return "integer", int64(0)
	case 700, 701: // real, double precision
		switch v.Text {
		case "NaN", "Infinity", "-Infinity":
			return "text", v.Text
		case "-0":
			return "blob", []byte("-0")
		}
		f, _ := strconv.ParseFloat(v.Text, 64)
		return "real", f
	case 17: // bytea
		b, _ := hex.DecodeString(strings.TrimPrefix(v.Text, `\x`))
		return "blob", b
	}
	return "text", v.Text
}

// sqliteDeclared is the column type docs/type-mapping.md declares.
func sqliteDeclared(c change.Column) string {
	switch c.BaseOID {
	case 16, 20, 21, 23:
		return "INTEGER"
	case 700, 701:
		return "REAL"
	case 17:
		return "BLOB"
	}
	return "TEXT"
}

// checkSQLiteStorage reads the SQLite file itself and checks every value's
// declared type, storage class and stored value against the documented
// mapping of the source's text.
func (e *env) checkSQLiteStorage(t *change.Table, src []change.Row) {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.cfg.Destination.Path+"?mode=ro&_pragma=busy_timeout(20000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	declared := map[string]string{}
	rows, err := db.QueryContext(e.ctx, "SELECT name, type FROM pragma_table_info(?)", t.ID.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			e.t.Fatal(err)
		}
		declared[name] = typ
	}
	rows.Close()
	sel := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		if want := sqliteDeclared(c); declared[c.Name] != want {
			e.t.Errorf("SQLite declares %s (%s) as %q, want %q", c.Name, c.Type, declared[c.Name], want)
		}
		q := `"` + c.Name + `"`
		sel[i] = "typeof(" + q + "), " + q
	}
	stmt := "SELECT " + strings.Join(sel, ", ") + " FROM " + t.ID.Name + " WHERE id = ?"
	for _, r := range src {
		vals := make([]any, 2*len(t.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := db.QueryRowContext(e.ctx, stmt, r[0].Text).Scan(ptrs...); err != nil {
			e.t.Fatalf("read SQLite row %s: %v", r[0].Text, err)
		}
		for i, c := range t.Columns {
			class, want := sqliteStored(c, r[i])
			if vals[2*i] != class || !sameStored(vals[2*i+1], want) {
				e.t.Errorf("SQLite row %s column %s (%s) for source %s: stored %v %s, want %s %s", r[0].Text, c.Name, c.Type,
					shortValue(r[i]), vals[2*i], shortAny(vals[2*i+1]), class, shortAny(want))
			}
		}
	}
}

func sameStored(got, want any) bool {
	if w, ok := want.([]byte); ok {
		g, ok := got.([]byte)
		return ok && bytes.Equal(g, w)
	}
	return got == want
}

func shortAny(v any) string {
	switch v := v.(type) {
	case string:
		return shortValue(change.Text(v))
	case []byte:
		return "x'" + shortValue(change.Text(hex.EncodeToString(v))) + "'"
	}
	return fmt.Sprintf("%T(%v)", v, v)
}
