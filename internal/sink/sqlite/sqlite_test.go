package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string) *Sink {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return open(t, filepath.Join(t.TempDir(), "sink.db"))
	})
}

func TestSettings(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "sink.db"))
	defer s.Close()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "10000"} {
		var got string
		if err := s.db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", pragma, got, want)
		}
	}
}

// TestStorage checks what lands in SQLite: native values where lossless,
// text otherwise, and table names after the source table.
func TestStorage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sink.db")
	s := open(t, path)
	defer s.Close()
	tbl := &change.Table{
		ID: change.TableID{Schema: "app", Name: "v"},
		Columns: []change.Column{
			{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23},
			{Name: "b", Type: "boolean", TypeOID: 16, BaseOID: 16},
			{Name: "f", Type: "double precision", TypeOID: 701, BaseOID: 701},
			{Name: "x", Type: "bytea", TypeOID: 17, BaseOID: 17},
			{Name: "n", Type: "numeric", TypeOID: 1700, BaseOID: 1700},
		},
		Key: []int{0},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	ins := func(vals ...string) sink.Op {
		row := make(change.Row, len(vals))
		for i, v := range vals {
			row[i] = change.Text(v)
		}
		return sink.Op{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: row}}
	}
	b := &sink.Batch{Ops: []sink.Op{
		ins("1", "t", "1.5", `\x00ff`, "1.50"),
		ins("2", "f", "NaN", `\x`, "NaN"),
		ins("3", "t", "-0", `\x0`, "10"),
	}}
	if err := s.Apply(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(t.Context(), `SELECT typeof(id), typeof(b), b, typeof(f), typeof(x), typeof(n) FROM "app.v" ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var a, b2, c, d, e, f string
		if err := rows.Scan(&a, &b2, &c, &d, &e, &f); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(a, " ", b2, " ", c, " ", d, " ", e, " ", f))
	}
	want := "[integer integer 1 real blob text integer integer 0 text blob text integer integer 1 blob text text]"
	if fmt.Sprint(got) != want {
		t.Errorf("storage:\ngot  %v\nwant %s", got, want)
	}
}

func TestOpenRejectsQuestionMark(t *testing.T) {
	if _, err := Open(t.Context(), filepath.Join(os.TempDir(), "a?b.db")); err == nil {
		t.Fatal("path with '?' accepted")
	}
}

// TestFormatFloat checks PostgreSQL's float output rules; the expected texts
// are what PostgreSQL 15 prints with extra_float_digits = 1.
func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		k    kind
		want string
	}{
		{1e15, kindFloat8, "1e+15"},
		{1e14, kindFloat8, "100000000000000"},
		{1234567890123456, kindFloat8, "1.234567890123456e+15"},
		{1.5e-5, kindFloat8, "1.5e-05"},
		{0.0001, kindFloat8, "0.0001"},
		{0.00001, kindFloat8, "1e-05"},
		{1e100, kindFloat8, "1e+100"},
		{0.1, kindFloat8, "0.1"},
		{-2.5, kindFloat8, "-2.5"},
		{math.MaxFloat64, kindFloat8, "1.7976931348623157e+308"},
		{5e-324, kindFloat8, "5e-324"},
		{math.NaN(), kindFloat8, "NaN"},
		{math.Inf(1), kindFloat8, "Infinity"},
		{math.Inf(-1), kindFloat4, "-Infinity"},
		{1e6, kindFloat4, "1e+06"},
		{1e5, kindFloat4, "100000"},
		{123456, kindFloat4, "123456"},
		{1234567, kindFloat4, "1.234567e+06"},
		{1.5e-5, kindFloat4, "1.5e-05"},
		{3.4028235e38, kindFloat4, "3.4028235e+38"},
		{0.1, kindFloat4, "0.1"},
	} {
		if got := formatFloat(tc.f, tc.k); got != tc.want {
			t.Errorf("formatFloat(%v, %d) = %q, want %q", tc.f, tc.k, got, tc.want)
		}
	}
}

// TestEncodeLossless checks that every value decodes to the text it came
// from, whether stored natively or not.
func TestEncodeLossless(t *testing.T) {
	cases := map[kind][]string{
		kindInt:    {"0", "-1", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "+1", "007", "x"},
		kindBool:   {"t", "f", "true", "1"},
		kindFloat8: {"1.5", "-0", "0", "NaN", "Infinity", "-Infinity", "1e+100", "1e100", "0.30000000000000004", "5e-324"},
		kindFloat4: {"0.1", "1e+06", "1000000", "-0", "3.4028235e+38", "1e-45"},
		kindBytes:  {`\x`, `\xdeadbeef`, `\xDEAD`, `\x0`, "plain", "12"},
		kindText:   {"", "12", "NaN", "\x01"},
	}
	for k, vals := range cases {
		for _, v := range vals {
			stored := encode(k, change.Text(v))
			if got := decode(k, stored); got != change.Text(v) {
				t.Errorf("kind %d: %q stored as %#v reads back %q", k, v, stored, got.Text)
			}
		}
	}
	if encode(kindInt, change.Null) != nil || !decode(kindInt, nil).Null {
		t.Error("NULL does not round-trip")
	}
	for i := range 2000 {
		f := math.Float64frombits(uint64(i) * 0x9E3779B97F4A7C15)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := formatFloat(f, kindFloat8)
		if back, err := strconv.ParseFloat(s, 64); err != nil || back != f {
			t.Fatalf("%v formats as %q", f, s)
		}
	}
}

func TestRefusesKeyOrderItCannotReproduce(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []change.Column{
		{Name: "k", Type: "text", TypeOID: 25, BaseOID: 25, Collation: "en_US"},
		{Name: "k", Type: "numeric", TypeOID: 1700, BaseOID: 1700},
		{Name: "k", Type: "date", TypeOID: 1082, BaseOID: 1082},
	} {
		tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Columns: []change.Column{c}, Key: []int{0}}
		err := s.EnsureTable(context.Background(), tbl)
		if !errors.Is(err, sink.ErrKeyOrder) || !strings.Contains(err.Error(), "PostgreSQL destination") {
			t.Errorf("key %s: got %v, want ErrKeyOrder saying what to do", c.Type, err)
		}
	}
}

// TestCheckpointWithoutResumeColumn: a destination whose checkpoint table
// predates resume tokens gains the column on Open; its checkpoint reads
// with an empty token, and a new one is stored beside the position.
func TestCheckpointWithoutResumeColumn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sink.db")
	s := open(t, path)
	for _, q := range []string{
		`DROP TABLE "_tidemark_checkpoint"`,
		`CREATE TABLE "_tidemark_checkpoint" ("stream" TEXT NOT NULL PRIMARY KEY, "position" INTEGER NOT NULL,
			"updated_at" TEXT NOT NULL)`,
		`INSERT INTO "_tidemark_checkpoint" VALUES ('main', 77, '2026-01-01 00:00:00.000')`,
	} {
		if _, err := s.db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	for i, want := range []sink.Checkpoint{{Position: 77}, {Position: 78, Resume: "0-1-5"}} {
		s = open(t, path)
		cp, err := s.Checkpoint(t.Context(), "main")
		if err != nil {
			t.Fatal(err)
		}
		if cp.Position != want.Position || cp.Resume != want.Resume {
			t.Fatalf("open %d: checkpoint %+v, want %+v", i+1, cp, want)
		}
		if err := s.Apply(t.Context(), &sink.Batch{Stream: "main", Position: 78, Resume: "0-1-5"}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

// TestConstraintViolationRejected: a batch that breaks a constraint someone
// added to the destination table is rejected, not retried as an outage.
func TestConstraintViolationRejected(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "sink.db"))
	defer s.Close()
	tbl := &change.Table{
		ID:      change.TableID{Schema: "public", Name: "u"},
		Columns: []change.Column{{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23}, {Name: "email", Type: "text", TypeOID: 25, BaseOID: 25}},
		Key:     []int{0},
	}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `CREATE UNIQUE INDEX "by_hand" ON "u" ("email")`); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*sink.Batch{
		{Stream: "s", Ops: []sink.Op{
			{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: change.Row{change.Text("1"), change.Text("a@x")}}},
			{Change: &change.Change{Kind: change.Insert, Table: tbl, Row: change.Row{change.Text("2"), change.Text("a@x")}}}}},
		{Stream: "s", Ops: []sink.Op{{Chunk: &sink.Chunk{Table: tbl, Rows: []change.Row{
			{change.Text("3"), change.Text("b@x")}, {change.Text("4"), change.Text("b@x")}}}}}},
	} {
		if err := s.Apply(t.Context(), b); !errors.Is(err, sink.ErrRejected) || !strings.Contains(err.Error(), "UNIQUE constraint failed") {
			t.Errorf("a batch breaking a unique index: %v, want ErrRejected saying so", err)
		}
	}
}

// TestRefusesNameTakenByNonTable: a view or an index holding a table's
// SQLite name, in any case, fails EnsureTable with ErrTableName saying
// what holds it and what to do; a table of the name in another case is
// another source table's.
func TestRefusesNameTakenByNonTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ddl, want string }{
		{`CREATE VIEW "Items" AS SELECT 1 AS id`, `SQLite already holds a view named "Items", not a table`},
		{`CREATE TABLE other (id INTEGER PRIMARY KEY, v INTEGER); CREATE INDEX items ON other (v)`, `SQLite already holds an index named "items", not a table`},
		{`CREATE TABLE "ITEMS" (id INTEGER PRIMARY KEY)`, `already holds another source table under "ITEMS"`},
	} {
		s := open(t, filepath.Join(t.TempDir(), "sink.db"))
		if _, err := s.db.ExecContext(t.Context(), c.ddl); err != nil {
			t.Fatal(err)
		}
		tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "items"},
			Columns: []change.Column{{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23}}, Key: []int{0}}
		err := s.EnsureTable(t.Context(), tbl)
		if !errors.Is(err, sink.ErrTableName) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "exclude") {
			t.Errorf("%s: EnsureTable got %v, want ErrTableName saying %q and what to do", c.ddl, err, c.want)
		}
		s.Close()
	}
}
