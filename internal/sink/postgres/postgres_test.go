package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
	"go.uber.org/goleak"
)

// server is the package's one throwaway PostgreSQL; each test gets its own
// database on it.
var (
	server *pgserver.Server
	dbSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	pgserver.ScrubEnv()
	s, err := pgserver.Start(context.Background(), pgserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL:", err)
		os.Exit(1)
	}
	server = s
	code := m.Run()
	s.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newDB creates a database of the test's own and returns its DSN.
func newDB(t *testing.T) string {
	t.Helper()
	dsn, err := server.CreateDatabase(t.Context(), "t"+strconv.FormatInt(dbSeq.Add(1), 10))
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

func open(t *testing.T, dsn string) *Sink {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return open(t, newDB(t)) })
}

func table() *change.Table {
	return &change.Table{
		ID: change.TableID{Schema: "app", Name: "items"},
		Columns: []change.Column{
			{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23},
			{Name: "price", Type: "numeric(12,2)", TypeOID: 1700, BaseOID: 1700},
			{Name: "name", Type: "character varying(20)", TypeOID: 1043, BaseOID: 1043, Collation: "C"},
			{Name: "tags", Type: "text[]", TypeOID: 1009, BaseOID: 1009},
			{Name: "mood", Type: "mood", TypeOID: 90001, BaseOID: 90001},
			{Name: "age", Type: "posint", TypeOID: 90002, BaseOID: 23},
			{Name: "code", Type: "text", TypeOID: 25, BaseOID: 25, Collation: "C"},
		},
		Key: []int{6, 0},
	}
}

// connect opens a connection to dsn, closed when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func query(t *testing.T, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEnsureTableTypes(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	conn := connect(t, dsn)
	s := open(t, dsn)
	defer s.Close()
	if err := s.EnsureTable(t.Context(), table()); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(query(t, conn, `SELECT attname || ' ' || format_type(atttypid, atttypmod) || coalesce(' ' || collname, '')
		FROM pg_attribute LEFT JOIN pg_collation c ON c.oid = attcollation AND attcollation <> 100
		WHERE attrelid = '"app"."items"'::regclass AND attnum > 0 ORDER BY attnum`))
	// Known types keep their typmods, the enum falls back to text, the domain
	// to its base type; the key's collation is kept.
	want := "[id integer price numeric(12,2) name character varying(20) tags text[] mood text age integer code text C]"
	if got != want {
		t.Errorf("columns:\ngot  %s\nwant %s", got, want)
	}
	pk := fmt.Sprint(query(t, conn, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = '"app"."items"'::regclass`))
	if pk != "[PRIMARY KEY (code, id)]" {
		t.Errorf("constraint %s", pk)
	}
	// When the destination has the enum, the column uses it.
	if _, err := conn.Exec(t.Context(), `CREATE TYPE mood AS ENUM ('ok', 'sad')`); err != nil {
		t.Fatal(err)
	}
	other := table()
	other.ID.Name = "items2"
	if err := s.EnsureTable(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	typ := query(t, conn, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = '"app"."items2"'::regclass AND attname = 'mood'`)
	if fmt.Sprint(typ) != "[mood]" {
		t.Errorf("mood column is %v", typ)
	}
}

// TestEnsureTableAfterSchemaDropped: the sink remembers the schemas and
// types it saw, and looks them up again when one was dropped since.
func TestEnsureTableAfterSchemaDropped(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), `CREATE TYPE mood AS ENUM ('ok', 'sad')`); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn)
	defer s.Close()
	if err := s.EnsureTable(t.Context(), table()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `DROP SCHEMA app CASCADE; DROP TYPE mood`); err != nil {
		t.Fatal(err)
	}
	other := table()
	other.ID.Name = "items2"
	if err := s.EnsureTable(t.Context(), other); err != nil {
		t.Fatalf("EnsureTable after the schema and the type were dropped: %v", err)
	}
	typ := query(t, conn, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = '"app"."items2"'::regclass AND attname = 'mood'`)
	if fmt.Sprint(typ) != "[text]" {
		t.Errorf("mood column is %v, want text (the type is gone)", typ)
	}
}

func TestEnsureTableRejectsInjectedType(t *testing.T) {
	t.Parallel()
	s := open(t, newDB(t))
	defer s.Close()
	tbl := table()
	tbl.Columns[1].Type = "int); DROP TABLE x; --"
	if err := s.EnsureTable(t.Context(), tbl); err == nil {
		t.Fatal("EnsureTable accepted a type that is no type name")
	}
}

// TestChunkSkipsIdenticalRows checks that re-applying a chunk does not write
// rows that did not change (their xmin stays), and does write a numeric whose
// display scale changed although it compares equal.
func TestChunkSkipsIdenticalRows(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	tbl := &change.Table{
		ID: change.TableID{Schema: "public", Name: "n"},
		Columns: []change.Column{
			{Name: "id", Type: "integer"}, {Name: "v", Type: "numeric"}, {Name: "doc", Type: "json"},
		},
		Key: []int{0},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	rows := []change.Row{
		{change.Text("1"), change.Text("1.0"), change.Text(`{"a": 1}`)},
		{change.Text("2"), change.Text("2.0"), change.Null},
	}
	chunk := func() {
		t.Helper()
		b := &sink.Batch{Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: rows}}}}
		if err := s.Apply(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	conn := connect(t, dsn)
	xmins := func() []string {
		return query(t, conn, `SELECT xmin::text || ' ' || v::text FROM n ORDER BY id`)
	}
	chunk()
	before := xmins()
	chunk()
	if after := xmins(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("identical chunk rewrote rows: %v -> %v", before, after)
	}
	rows[1][1] = change.Text("2.00")
	chunk()
	after := xmins()
	if after[0] != before[0] || after[1] == before[1] {
		t.Errorf("scale change: %v -> %v, want only row 2 rewritten", before, after)
	}
}

// TestReconnects checks that a sink whose connection died reconnects on the
// next call, staging table and prepared statements included.
func TestReconnects(t *testing.T) {
	t.Parallel()
	s := open(t, newDB(t))
	defer s.Close()
	tbl := table()
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	row := func(id string) change.Row {
		return change.Row{change.Text(id), change.Text("1.50"), change.Text("n"), change.Text(`{a,"b c"}`),
			change.Text("ok"), change.Text("3"), change.Text("x")}
	}
	for i := range 2 {
		b := &sink.Batch{Stream: "s", Position: change.LSN(i + 1), Ops: []sink.Op{
			{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: row("1")}},
			{Chunk: &sink.Chunk{Table: tbl, Low: change.Key{change.Text("x"), change.Text("1")}, Rows: []change.Row{row("2")}}},
		}}
		if err := s.Apply(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		s.conn.Close(t.Context()) // as if the server had dropped it
	}
	got, err := s.ReadRange(t.Context(), tbl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1][3].Text != `{a,"b c"}` {
		t.Errorf("rows %v", got)
	}
}

func TestCopyEscaping(t *testing.T) {
	for in, want := range map[string]string{
		"plain":          "plain",
		"a\tb\nc\rd\\e":  `a\tb\nc\rd\\e`,
		`\N`:             `\\N`,
		"\\.":            `\\.`,
		"ünï\tcödé":      `ünï\tcödé`,
		"":               "",
		"trailing\\":     `trailing\\`,
		"\n\n":           `\n\n`,
		"x\x01y\x7f\x08": "x\x01y\x7f\x08",
	} {
		if got := string(appendCopyValue(nil, change.Text(in))); got != want {
			t.Errorf("escape %q = %q, want %q", in, got, want)
		}
	}
	if got := string(appendCopyValue(nil, change.Null)); got != `\N` {
		t.Errorf("NULL = %q", got)
	}
}

// TestChunkAbsentRowThere: a chunk row the range read did not find (here
// one outside the chunk's range) but the table holds makes the COPY of
// absent rows fail on its key; the COPY is undone and the chunk upserted.
func TestChunkAbsentRowThere(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	tbl := &change.Table{
		ID:      change.TableID{Schema: "public", Name: "a"},
		Columns: []change.Column{{Name: "id", Type: "integer"}, {Name: "v", Type: "text"}},
		Key:     []int{0},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	row := func(id, v string) change.Row { return change.Row{change.Text(id), change.Text(v)} }
	apply := func(ch *sink.Chunk) {
		t.Helper()
		if err := s.Apply(t.Context(), &sink.Batch{Ops: []sink.Op{{Chunk: ch}}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(&sink.Chunk{Table: tbl, Rows: []change.Row{row("1", "a"), row("2", "b"), row("3", "c"), row("9", "i")}})
	ch := &sink.Chunk{Table: tbl, Low: change.Key{change.Text("1")}, High: change.Key{change.Text("3")},
		Rows: []change.Row{row("2", "b"), row("9", "new")}}
	apply(ch)
	if ch.Removed != 1 {
		t.Errorf("removed %d rows, want 1 (3, deleted before the fallback)", ch.Removed)
	}
	conn := connect(t, dsn)
	if got := query(t, conn, `SELECT id || '=' || v FROM a ORDER BY id`); fmt.Sprint(got) != "[1=a 2=b 9=new]" {
		t.Fatalf("rows %v, want [1=a 2=b 9=new]", got)
	}
}

// TestReadKeysInParts: keys beyond one query's parameters are read in
// several queries, none lost or repeated.
func TestReadKeysInParts(t *testing.T) {
	defer func(n int) { paramsPerRead = n }(paramsPerRead)
	paramsPerRead = 4 // two composite keys a query
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	tbl := &change.Table{
		ID:      change.TableID{Schema: "public", Name: "kp"},
		Columns: []change.Column{{Name: "a", Type: "integer"}, {Name: "b", Type: "text", Collation: "C"}, {Name: "v", Type: "text"}},
		Key:     []int{0, 1},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	var rows []change.Row
	var keys []change.Key
	for i := range 7 {
		r := change.Row{change.Text(strconv.Itoa(i)), change.Text("k"), change.Text("v")}
		rows = append(rows, r)
		keys = append(keys, tbl.RowKey(r))
	}
	if err := s.Apply(t.Context(), &sink.Batch{Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: rows}}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadKeys(t.Context(), tbl, append(keys, change.Key{change.Text("99"), change.Text("k")}))
	if err != nil || len(got) != 7 {
		t.Fatalf("read 8 keys (7 there) two at a time: %d rows, %v", len(got), err)
	}
}

// TestCheckpointWithoutResumeColumn: a destination whose checkpoint table
// predates resume tokens gains the column on Open; its checkpoint reads
// with an empty token, and a new one is stored beside the position.
func TestCheckpointWithoutResumeColumn(t *testing.T) {
	dsn := newDB(t)
	conn := connect(t, dsn)
	for _, q := range []string{
		`CREATE SCHEMA "_tidemark"`,
		`CREATE TABLE "_tidemark"."checkpoint" ("stream" text PRIMARY KEY, "position" bigint NOT NULL,
			"updated_at" timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO "_tidemark"."checkpoint" ("stream", "position") VALUES ('main', 77)`,
	} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn)
	defer s.Close()
	cp, err := s.Checkpoint(t.Context(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Position != 77 || cp.Resume != "" {
		t.Fatalf("old checkpoint read as %+v, want position 77 and no resume token", cp)
	}
	if err := s.Apply(t.Context(), &sink.Batch{Stream: "main", Position: 78, Resume: "0-1-5"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dsn) // a second Open finds the column and leaves it
	defer s.Close()
	if cp, err = s.Checkpoint(t.Context(), "main"); err != nil || cp.Position != 78 || cp.Resume != "0-1-5" {
		t.Fatalf("checkpoint after the migration = %+v, %v; want position 78, resume 0-1-5", cp, err)
	}
}

// TestConstraintViolationRejected: a batch that breaks a constraint someone
// added to the destination table (here a unique index) is rejected, not
// an outage: retrying the same batch cannot succeed, so the stream must
// not retry it forever.
func TestConstraintViolationRejected(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	tbl := &change.Table{
		ID:      change.TableID{Schema: "public", Name: "u"},
		Columns: []change.Column{{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23}, {Name: "email", Type: "text", TypeOID: 25, BaseOID: 25}},
		Key:     []int{0},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), `CREATE UNIQUE INDEX by_hand ON u (email)`); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*sink.Batch{
		{Stream: "s", Ops: []sink.Op{
			{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: change.Row{change.Text("1"), change.Text("a@x")}}},
			{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: change.Row{change.Text("2"), change.Text("a@x")}}}}},
		{Stream: "s", Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: []change.Row{
			{change.Text("3"), change.Text("b@x")}, {change.Text("4"), change.Text("b@x")}}}}}},
	} {
		if err := s.Apply(t.Context(), b); !errors.Is(err, sink.ErrRejected) || !strings.Contains(err.Error(), "by_hand") {
			t.Errorf("a batch breaking a unique index: %v, want ErrRejected naming the index", err)
		}
	}
}

// An update that leaves a value Unchanged (PostgreSQL's unchanged TOAST)
// keeps the destination's value also when the user made that column NOT
// NULL: PostgreSQL checks NOT NULL on an INSERT's proposed row before ON
// CONFLICT, so the row must not be proposed with the column left out.
// Live and in a chunk, with other columns changed and with none; a row the
// destination lacks cannot be made up and is refused, naming the column.
func TestUnchangedIntoNotNull(t *testing.T) {
	t.Parallel()
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	tbl := &change.Table{
		ID: change.TableID{Schema: "public", Name: "docs"},
		Columns: []change.Column{{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23},
			{Name: "v", Type: "integer", TypeOID: 23, BaseOID: 23},
			{Name: "body", Type: "text", TypeOID: 25, BaseOID: 25}},
		Key: []int{0},
	}
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), `CREATE TABLE docs (id integer PRIMARY KEY, v integer NOT NULL, body text NOT NULL);
		INSERT INTO docs VALUES (1, 0, 'one'), (2, 0, 'two'), (3, 0, 'three')`); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	kept := change.Value{Unchanged: true}
	upd := func(row change.Row) sink.Op {
		return sink.Op{Change: &change.Change{Kind: change.Update, Table: tbl, Row: row}}
	}
	apply := func(b *sink.Batch) {
		t.Helper()
		if err := s.Apply(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	apply(&sink.Batch{Stream: "s", Ops: []sink.Op{
		upd(change.Row{change.Text("1"), change.Text("10"), kept}),
		upd(change.Row{change.Text("2"), kept, kept}),
	}})
	apply(&sink.Batch{Stream: "s", Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Keep: true, Rows: []change.Row{
		{change.Text("3"), change.Text("30"), kept}}}}}})
	got := query(t, conn, `SELECT format('%s %s %s', id, v, body) FROM docs ORDER BY id`)
	if want := []string{"1 10 one", "2 0 two", "3 30 three"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	err := s.Apply(t.Context(), &sink.Batch{Stream: "s", Ops: []sink.Op{upd(change.Row{change.Text("4"), change.Text("40"), kept})}})
	if !errors.Is(err, sink.ErrRejected) || !strings.Contains(err.Error(), "body") {
		t.Errorf("an Unchanged NOT NULL value of a row the destination lacks: %v, want ErrRejected naming the column", err)
	}

	// A key compared by a source's collation (case-insensitive here) finds
	// the row and takes the change's spelling, as an upsert does.
	ci := &change.Table{ID: change.TableID{Schema: "public", Name: "ci"}, Key: []int{0},
		Columns: []change.Column{{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: "utf8mb4_general_ci"},
			{Name: "body", Type: "text", TypeOID: 25, BaseOID: 25}}}
	if err := s.EnsureTable(t.Context(), ci); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `INSERT INTO ci VALUES ('Abc', 'kept'); ALTER TABLE ci ALTER COLUMN body SET NOT NULL`); err != nil {
		t.Fatal(err)
	}
	apply(&sink.Batch{Stream: "s", Ops: []sink.Op{{Change: &change.Change{Kind: change.Update, Table: ci, Row: change.Row{change.Text("ABC"), kept}}}}})
	if got := query(t, conn, `SELECT k || ' ' || body FROM ci`); fmt.Sprint(got) != "[ABC kept]" {
		t.Errorf("collated key: rows %q, want [ABC kept]", got)
	}
}
