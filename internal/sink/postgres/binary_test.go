package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgbinary"
	"github.com/tidemark/tidemark/internal/sink"
)

// binaryTable is a table of every kind of value a binary chunk carries;
// the source's copy of it is src.t, the destination's public.t.
func binaryTable() *change.Table {
	c := func(name, typ string, oid uint32) change.Column {
		return change.Column{Name: name, Type: typ, TypeOID: oid, BaseOID: oid}
	}
	return &change.Table{
		ID: change.TableID{Schema: "public", Name: "t"},
		Columns: []change.Column{
			c("id", "bigint", 20), c("k", "uuid", 2950), c("amount", "numeric(12,2)", 1700), c("f", "double precision", 701),
			c("at", "timestamp with time zone", 1184), c("local", "timestamp without time zone", 1114), c("d", "date", 1082),
			c("span", "time without time zone", 1083), c("doc", "jsonb", 3802), c("tags", "text[]", 1009), c("note", "text", 25),
			c("ok", "boolean", 16), c("raw", "bytea", 17),
		},
		Key: []int{0, 1},
	}
}

const binarySource = `CREATE SCHEMA src;
CREATE TABLE src.t (id bigint, k uuid, amount numeric(12,2), f double precision, at timestamptz, local timestamp,
	d date, span time, doc jsonb, tags text[], note text, ok boolean, raw bytea, PRIMARY KEY (id, k));
INSERT INTO src.t SELECT g, md5(g::text)::uuid, g * 1.5, g / 3.0, timestamptz '2024-01-01 00:00:00.123456+00' + g * interval '17 seconds',
	timestamp '1999-12-31 23:59:59' - g * interval '1 day', date '0044-03-15 BC' + g, (g * interval '1 minute 1.5 seconds')::time,
	jsonb_build_object('g', g, 'a', ARRAY[g, -g], 's', E'tab\there'), ARRAY['x' || g, NULL, E'q"\\'], E'line\nbreak ' || g,
	g % 2 = 0, decode(md5(g::text), 'hex') FROM generate_series(1, 300) AS g;
INSERT INTO src.t VALUES (0, '00000000-0000-0000-0000-000000000000', NULL, 'NaN', 'infinity', '-infinity', 'infinity', NULL,
	'null', '{}', '', NULL, '\x');`

// readSource reads src.t's rows with key in (after, ...] as a PostgreSQL
// source reads a chunk, in binary when binary is set.
func readSource(t *testing.T, conn *pgx.Conn, tbl *change.Table, binary bool) []change.Row {
	t.Helper()
	var formats []int16
	if binary {
		formats = pgbinary.ResultFormats(tbl)
	}
	rr := conn.PgConn().ExecParams(t.Context(), "SELECT * FROM src.t ORDER BY id, k", nil, nil, nil, formats)
	var rows []change.Row
	for rr.NextRow() {
		rows = append(rows, pgbinary.Row(rr.Values(), formats))
	}
	if _, err := rr.Close(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// sameTables fails the test unless public.t holds src.t's rows.
func sameTables(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	src := query(t, conn, "SELECT whole::text FROM src.t AS whole ORDER BY id, k")
	dst := query(t, conn, "SELECT whole::text FROM public.t AS whole ORDER BY id, k")
	if strings.Join(src, "\n") != strings.Join(dst, "\n") {
		t.Fatalf("destination differs from the source:\nsource %d rows, first %q\ndestination %d rows, first %q", len(src), src[:min(2, len(src))], len(dst), dst[:min(2, len(dst))])
	}
}

// binarySetup opens a sink on a database of the test's own holding
// src.t (binarySource), with public.t made for binaryTable.
func binarySetup(t *testing.T) (*Sink, *pgx.Conn, *change.Table) {
	t.Helper()
	dsn := newDB(t)
	s := open(t, dsn)
	t.Cleanup(func() { s.Close() })
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), binarySource); err != nil {
		t.Fatal(err)
	}
	tbl := binaryTable()
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	return s, conn, tbl
}

// learnTypes applies the first row of src.t as a text chunk, whose check
// shows the sink the destination's types (as its EnsureTable did), and
// returns src.t read in binary.
func learnTypes(t *testing.T, s *Sink, conn *pgx.Conn, tbl *change.Table) []change.Row {
	t.Helper()
	text := readSource(t, conn, tbl, false)
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, High: tbl.RowKey(text[0]), Rows: text[:1]}); err != nil {
		t.Fatal(err)
	}
	return readSource(t, conn, tbl, true)
}

func applyChunk(t *testing.T, s *Sink, ch *sink.Chunk) error {
	t.Helper()
	return s.Apply(t.Context(), &sink.Batch{Stream: "s", Ops: []sink.Op{{Chunk: ch}}})
}

// TestBinaryChunks writes chunks read in binary, on each of the sink's
// paths: into an empty range, over identical rows (nothing written), with
// a few rows changed (upserts), with most changed (the staging table), with
// a row mixing binary and text values, and a filtered chunk.
func TestBinaryChunks(t *testing.T) {
	t.Parallel()
	s, conn, tbl := binarySetup(t)
	// A destination column the user made NOT NULL: rows staged with some
	// values missing (mixed ones) must not trip it.
	if _, err := conn.Exec(t.Context(), "ALTER TABLE public.t ALTER COLUMN note SET NOT NULL"); err != nil {
		t.Fatal(err)
	}
	if !s.TakesBinary(tbl) {
		t.Fatal("TakesBinary false for the table the sink made from the source's shape")
	}
	// A text chunk of the first rows, as the types are learnt from.
	text := readSource(t, conn, tbl, false)
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, High: tbl.RowKey(text[9]), Rows: text[:10]}); err != nil {
		t.Fatal(err)
	}
	if !s.TakesBinary(tbl) {
		t.Fatal("TakesBinary false after a chunk saw the source's types")
	}

	rows := readSource(t, conn, tbl, true)
	if !pgbinary.HasBinary(rows) || rows[1][2].Text == text[1][2].Text {
		t.Fatal("the binary read gave text")
	}
	xmins := func() []string { return query(t, conn, "SELECT xmin::text FROM public.t ORDER BY id, k") }
	// Ten rows there, identical; the rest absent.
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)
	before := xmins()
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if after := xmins(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("a binary chunk of identical rows rewrote rows")
	}

	// A few rows changed, then most: upserts, then the staging table.
	for _, changed := range []string{"id % 100 = 7", "id % 10 <> 0"} {
		if _, err := conn.Exec(t.Context(), "UPDATE src.t SET amount = amount + 1, at = at + interval '1 microsecond', tags = tags || 'new'::text WHERE "+changed); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), "DELETE FROM src.t WHERE id = (SELECT max(id) FROM src.t)"); err != nil {
			t.Fatal(err)
		}
		if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: readSource(t, conn, tbl, true)}); err != nil {
			t.Fatal(err)
		}
		sameTables(t, conn)
	}

	// A window's update that kept a binary value: one row mixes both.
	rows = readSource(t, conn, tbl, true)
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET note = 'from the window' WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	rows[5][10] = change.Text("from the window")
	if _, err := conn.Exec(t.Context(), "DELETE FROM public.t WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)

	// A filtered chunk (Keep) goes through the staging table, a mixed row
	// with it.
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET ok = NOT ok, note = note || '!' WHERE id < 50"); err != nil {
		t.Fatal(err)
	}
	rows = readSource(t, conn, tbl, true)
	rows[7][2] = change.Text(query(t, conn, "SELECT amount::text FROM src.t WHERE id = 7")[0]) // note stays binary: staged NULL
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: rows, Keep: true}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)
}

// TestTakesBinaryFromCreateOrCheck: a table the sink made from the
// source's shape, or one its check found with the source's types, takes
// binary values from its first chunk; one the sink has not seen, or not
// for typesTrusted, or found with another type, does not.
func TestTakesBinaryFromCreateOrCheck(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := newDB(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, binarySource); err != nil {
		t.Fatal(err)
	}
	tbl := binaryTable()
	maker := open(t, dsn)
	defer maker.Close()
	if maker.TakesBinary(tbl) {
		t.Fatal("TakesBinary before the table exists")
	}
	if err := maker.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	if !maker.TakesBinary(tbl) {
		t.Fatal("TakesBinary false for the table the sink made")
	}
	// What the sink saw is trusted for typesTrusted only.
	maker.destTypes.now = func() time.Time { return time.Now().Add(typesTrusted + time.Second) }
	if maker.TakesBinary(tbl) {
		t.Fatal("TakesBinary on types seen longer ago than typesTrusted")
	}
	maker.destTypes.now = nil
	checker := open(t, dsn)
	defer checker.Close()
	if err := checker.EnsureTable(ctx, tbl); err != nil { // finds it
		t.Fatal(err)
	}
	if checker.TakesBinary(tbl) {
		t.Fatal("TakesBinary for a table the sink has neither made nor checked")
	}
	// afterCheck runs sql (if any) on the destination, has the checker
	// check the table, and wants TakesBinary then.
	afterCheck := func(sql string, want bool, what string) {
		t.Helper()
		if sql != "" {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := checker.CheckTable(ctx, tbl); err != nil {
			t.Fatal(err)
		}
		if got := checker.TakesBinary(tbl); got != want {
			t.Fatalf("TakesBinary %v after a check %s, want %v", got, what, want)
		}
	}
	afterCheck("", true, "found the source's types")
	afterCheck("ALTER TABLE public.t ALTER COLUMN at TYPE timestamp", false, "found a column of another type")
	// The maker's record is stale now: its binary chunk is refused in its
	// own transaction (TestBinaryTypesChanged), nothing written.
	err := applyChunk(t, maker, &sink.Chunk{Table: tbl, Rows: readSource(t, conn, tbl, true)})
	if !errors.Is(err, sink.ErrRejected) {
		t.Fatalf("binary chunk after the column changed: %v; want a rejection", err)
	}
	if n := query(t, conn, "SELECT count(*)::text FROM public.t"); n[0] != "0" {
		t.Errorf("the refused chunk wrote rows: %s in the table", n[0])
	}
	// A check that finds no table drops what was seen of it.
	afterCheck("ALTER TABLE public.t ALTER COLUMN at TYPE timestamptz", true, "found the column's type put back")
	afterCheck("DROP TABLE public.t", false, "found no table")
}

// TestBinaryAfterHandAlter: a column's type changed on the source, and the
// destination's by hand to match, while the sink's session keeps a
// staging table and prepared upserts made for the old type. Binary
// values of the new type must not be read as the old one: the staging
// table is made again, and upserts name their parameters' types.
func TestBinaryAfterHandAlter(t *testing.T) {
	t.Parallel()
	s, conn, tbl := binarySetup(t)
	rows := learnTypes(t, s, conn, tbl)
	// Staging table and prepared upserts of the double precision f.
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: rows, Keep: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET f = f + 1 WHERE id = 9"); err != nil {
		t.Fatal(err)
	}
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: readSource(t, conn, tbl, true)}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)
	// f to another type; amount to another typmod (a staging column of
	// the old one would round the new values).
	for _, table := range []string{"src.t", "public.t"} {
		if _, err := conn.Exec(t.Context(), "ALTER TABLE "+table+" ALTER COLUMN f TYPE bigint USING CASE WHEN f = 'NaN' THEN -1 ELSE round(f * 1e6) END, "+
			"ALTER COLUMN amount TYPE numeric(14,4)"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET amount = amount + 0.0001"); err != nil {
		t.Fatal(err)
	}
	tbl.Columns[3] = change.Column{Name: "f", Type: "bigint", TypeOID: 20, BaseOID: 20}
	tbl.Columns[2].Type = "numeric(14,4)"
	if s.TakesBinary(tbl) {
		t.Fatal("TakesBinary before a chunk saw the new type")
	}
	// A filtered chunk in text, as the first read after the change is:
	// no range read, so no statement notices the new type by failing.
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET f = f + 7"); err != nil {
		t.Fatal(err)
	}
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: readSource(t, conn, tbl, false), Keep: true}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)
	if !s.TakesBinary(tbl) {
		t.Fatal("TakesBinary false after a chunk saw the new type")
	}
	// Binary now: every row differs (the staging table), one mixes text
	// with binary (an upsert of the statement's text before the change).
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET f = f + 7, note = note || '?'"); err != nil {
		t.Fatal(err)
	}
	rows = readSource(t, conn, tbl, true)
	rows[9][10] = change.Text(query(t, conn, "SELECT note FROM src.t WHERE id = 9")[0])
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: rows, Keep: true}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)

	// A typmod alone: the types still match, the staging table's numeric
	// scale does not.
	for _, table := range []string{"src.t", "public.t"} {
		if _, err := conn.Exec(t.Context(), "ALTER TABLE "+table+" ALTER COLUMN amount TYPE numeric(16,6)"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(t.Context(), "UPDATE src.t SET amount = amount + 0.000001"); err != nil {
		t.Fatal(err)
	}
	tbl.Columns[2].Type = "numeric(16,6)"
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Rows: readSource(t, conn, tbl, true), Keep: true}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)
}

// TestBinaryChunkIntoEmptyTable: a fresh destination table takes a binary
// chunk straight in, binary COPY and all.
func TestBinaryChunkIntoEmptyTable(t *testing.T) {
	t.Parallel()
	s, conn, tbl := binarySetup(t)
	rows := learnTypes(t, s, conn, tbl)
	if err := applyChunk(t, s, &sink.Chunk{Table: tbl, Low: tbl.RowKey(rows[0]), Rows: rows[1:]}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, conn)
}

// TestBinaryTypesChanged: a destination column whose type changed after
// the sink learnt the types refuses a binary chunk, as a rejection that
// says why, writes nothing, and later chunks are read in text.
func TestBinaryTypesChanged(t *testing.T) {
	t.Parallel()
	s, conn, tbl := binarySetup(t)
	rows := learnTypes(t, s, conn, tbl)
	// Both 8 bytes: read as the other type, a value would be wrong.
	if _, err := conn.Exec(t.Context(), "ALTER TABLE public.t ALTER COLUMN at TYPE timestamp"); err != nil {
		t.Fatal(err)
	}
	err := applyChunk(t, s, &sink.Chunk{Table: tbl, Low: tbl.RowKey(rows[0]), Rows: rows[1:]})
	if !errors.Is(err, sink.ErrRejected) || !strings.Contains(err.Error(), "no longer has the source's type") {
		t.Fatalf("binary chunk into a changed column: %v; want a rejection saying why", err)
	}
	if n := query(t, conn, "SELECT count(*)::text FROM public.t"); n[0] != "1" {
		t.Errorf("the refused chunk wrote rows: %s in the table", n[0])
	}
	if s.TakesBinary(tbl) {
		t.Error("TakesBinary still true after the check found another type")
	}
}

// TestPassableArrays: an array type travels in binary exactly when its
// element type does (an array's binary form names its element's oid).
func TestPassableArrays(t *testing.T) {
	t.Parallel()
	conn, err := pgx.Connect(t.Context(), newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT a.oid, e.oid, a.typname FROM pg_type AS e JOIN pg_type AS a ON a.oid = e.typarray WHERE e.oid < 10000")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var oid, elem uint32
		var name string
		if err := rows.Scan(&oid, &elem, &name); err != nil {
			t.Fatal(err)
		}
		if pgbinary.Passable(oid) != pgbinary.Passable(elem) {
			t.Errorf("%s (oid %d): passable %v, its element %d %v", name, oid, pgbinary.Passable(oid), elem, pgbinary.Passable(elem))
		}
		if pgbinary.Passable(oid) {
			n++
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if n != 19 {
		t.Errorf("%d passable array types found, want 19", n)
	}
}
