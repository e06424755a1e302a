package event

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// TestTableReader feeds a reader events as a destination's log carries
// them, reading between batches: ranges come back in the source's key
// order (numerically, 10 after 9), decoded to canonical text, and each
// read sees exactly the events applied before it.
func TestTableReader(t *testing.T) {
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Tag: change.TagInt64}, {Name: "at", Tag: change.TagTimestampTZ, TypeMod: 6}, {Name: "b", Tag: change.TagBytes},
	}}
	enc := &Encoder{Connector: "postgresql", SchemaField: true}
	row := func(id int) change.Row {
		return change.Row{change.Text(fmt.Sprint(id)), change.Text(fmt.Sprintf("2024-02-%02d 13:45:01.5+00", id%28+1)), change.Text(`\x00ff`)}
	}
	r, err := NewTableReader(tbl)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(m Message, err error) {
		t.Helper()
		if err == nil {
			err = r.Apply(0, m.Value)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 12; i++ {
		apply(enc.Row(tbl, row(i), Origin{}))
	}
	apply(enc.Chunk(tbl, ChunkMark{BackfillID: 1, High: change.Key{change.Text("12")}, Rows: 12, Reset: true}, Origin{}))
	keysOf := func(rows []change.Row) string {
		var ks []string
		for _, r := range rows {
			ks = append(ks, r[0].Text)
		}
		return strings.Join(ks, ",")
	}
	read := func(low, high change.Key, want string) {
		t.Helper()
		rows, err := r.ReadRange(low, high)
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(rows); got != want {
			t.Fatalf("(%v, %v]: keys %s, want %s", low, high, got, want)
		}
		for _, got := range rows {
			var id int
			fmt.Sscan(got[0].Text, &id)
			if w := row(id); !reflect.DeepEqual(got, w) && got[1].Text != "changed" {
				t.Fatalf("row %d: %v, want %v", id, got, w)
			}
		}
	}
	k := func(s string) change.Key { return change.Key{change.Text(s)} }
	read(nil, k("3"), "1,2,3")
	read(k("8"), k("11"), "9,10,11")
	read(k("11"), nil, "12")

	// Changes after the first reads: the next read sees them.
	msgs, err := enc.Change(&change.Change{Kind: change.Delete, Table: tbl, OldKey: k("10")}, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	apply(msgs[0], nil)
	msgs, err = enc.Change(&change.Change{Kind: change.Insert, Table: tbl, Row: row(100)}, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	apply(msgs[0], nil)
	read(k("8"), nil, "9,11,12,100")
	got, err := r.ReadKeys([]change.Key{k("100"), k("10"), k("2")})
	if err != nil {
		t.Fatal(err)
	}
	if keysOf(got) != "100,2" {
		t.Fatalf("ReadKeys: %s, want 100,2", keysOf(got))
	}

	// A reset chunk drops the range's keys it did not send.
	apply(enc.Row(tbl, row(5), Origin{}))
	apply(enc.Chunk(tbl, ChunkMark{BackfillID: 2, Low: k("3"), High: k("9"), Rows: 1, Reset: true}, Origin{}))
	read(nil, nil, "1,2,3,5,11,12,100")
	if r.Len() != 7 {
		t.Fatalf("Len %d, want 7", r.Len())
	}
}

// TestKeyOrderRefused: a key whose source order a replay cannot reproduce
// is refused, naming the column.
func TestKeyOrderRefused(t *testing.T) {
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0}, Columns: []change.Column{
		{Name: "name", Type: "text", Tag: change.TagText, Collation: "en_US"},
	}}
	if _, err := NewTableReader(tbl); err == nil || !strings.Contains(err.Error(), `"name"`) {
		t.Fatalf("text key under a locale: %v", err)
	}
	tbl.Columns[0].ByteOrder = true
	if _, err := NewTableReader(tbl); err != nil {
		t.Fatalf("byte-ordered text key: %v", err)
	}
}

func TestKeyOrder(t *testing.T) {
	for _, c := range []struct {
		col        change.Column
		lo, hi, eq string
	}{
		{change.Column{Tag: change.TagInt64}, "9", "10", ""},
		{change.Column{Tag: change.TagDecimal}, "9.5", "10", "1.10=1.1"},
		{change.Column{Tag: change.TagDecimal}, "Infinity", "NaN", ""},
		{change.Column{Tag: change.TagFloat64}, "1e+100", "Infinity", "-0=0"},
		{change.Column{Tag: change.TagDate}, "0044-03-15 BC", "0001-01-01", ""},
		{change.Column{Tag: change.TagTimestamp}, "2024-02-29 13:45:01", "infinity", ""},
		{change.Column{Tag: change.TagTimestampTZ}, "9999-12-31 00:00:00+00", "12345-01-01 00:00:00+00", ""},
		{change.Column{Tag: change.TagTime}, "09:00:00", "10:00:00", ""},
		{change.Column{Tag: change.TagBytes}, `\x00`, `\x0000`, ""},
		{change.Column{Tag: change.TagText, Native: "varchar(10)", Collation: "utf8mb4_general_ci"}, "a", "B", "a=A"},
	} {
		f, err := valueOrder(c.col)
		if err != nil {
			t.Fatal(err)
		}
		if f(c.lo, c.hi) >= 0 || f(c.hi, c.lo) <= 0 {
			t.Errorf("%s: %q should sort before %q", c.col.Tag, c.lo, c.hi)
		}
		if a, b, ok := strings.Cut(c.eq, "="); ok && f(a, b) != 0 {
			t.Errorf("%s: %q should equal %q", c.col.Tag, a, b)
		}
	}
}
