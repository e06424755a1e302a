package mysql

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// inShape keeps of each change's row the columns of t, by name: what the
// row held of the described table.
func inShape(t *change.Table, cs []change.Change) []change.Change {
	out := make([]change.Change, len(cs))
	for i, c := range cs {
		row := make(change.Row, len(t.Columns))
		for j, col := range t.Columns {
			if k := c.Table.ColumnIndex(col.Name); k >= 0 && c.Row != nil {
				row[j] = c.Row[k]
			}
		}
		if c.Row == nil {
			row = nil
		}
		c.Row = row
		out[i] = c
	}
	return out
}

// columnsOf writes a shape's columns as "num:name type".
func columnsOf(t *change.Table) string {
	var parts []string
	for _, c := range t.Columns {
		parts = append(parts, itoa(int(c.Num))+":"+c.Name+" "+c.Type)
	}
	return strings.Join(parts, ", ")
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestStreamShapeFollowsDDL: every binlog change carries its table's shape
// as the table map had it when the row was written: an unchanged table
// keeps the described table itself; an added column (at the end, FIRST)
// gets a new number, a renamed one keeps its number under the new name, a
// widened one its number with the new type, and a dropped one is gone; the
// rows are decoded with the shape's columns.
func TestStreamShapeFollowsDDL(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE s (id int PRIMARY KEY, v varchar(10), n int, d json)")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, done := streamFromNow(ctx, t, src, tbl)
	exec(t, root,
		`INSERT INTO s VALUES (1, 'a', 1, '{}')`,
		"ALTER TABLE s ADD COLUMN x int FIRST",
		`INSERT INTO s VALUES (7, 2, 'b', 2, '[]')`,
		"ALTER TABLE s RENAME COLUMN v TO w",
		`INSERT INTO s VALUES (8, 3, 'c', 3, '1')`,
		"ALTER TABLE s MODIFY n bigint, MODIFY w varchar(50)",
		`INSERT INTO s VALUES (9, 4, 'a longer text than ten', 9223372036854775807, '2')`,
		"ALTER TABLE s DROP COLUMN d, ADD COLUMN e int AFTER id",
		`INSERT INTO s VALUES (10, 5, 6, 'e', 5)`,
		"ALTER TABLE s CHANGE w v2 varchar(50)",
		`INSERT INTO s VALUES (11, 6, 7, 'f', 6)`,
	)
	txns := receiveTxns(t, out, done, 6)
	if txns[0].Changes[0].Table != tbl {
		t.Errorf("an unchanged table's change carries %s, want the described table", columnsOf(txns[0].Changes[0].Table))
	}
	want := []struct{ shape, row string }{
		{"1:id integer, 2:v character varying(10), 3:n integer, 4:d json", "insert [1 a 1 {}] <nil>"},
		{"1:id integer, 2:v character varying(10), 3:n integer, 4:d json, 5:x integer", "insert [2 b 2 [] 7] <nil>"},
		{"1:id integer, 2:w character varying(10), 3:n integer, 4:d json, 5:x integer", "insert [3 c 3 1 8] <nil>"},
		{"1:id integer, 2:w character varying(50), 3:n bigint, 4:d json, 5:x integer", "insert [4 a longer text than ten 9223372036854775807 2 9] <nil>"},
		{"1:id integer, 2:w character varying(50), 3:n bigint, 5:x integer, 6:e integer", "insert [5 e 5 10 6] <nil>"},
		{"1:id integer, 2:v2 character varying(50), 3:n bigint, 5:x integer, 6:e integer", "insert [6 f 6 11 7] <nil>"},
	}
	for i, w := range want {
		c := txns[i].Changes[0]
		if got := columnsOf(c.Table); got != w.shape {
			t.Errorf("change %d: shape %s, want %s", i, got, w.shape)
		}
		if got := describeChanges([]change.Change{c})[0]; got != w.row {
			t.Errorf("change %d: %s, want %s", i, got, w.row)
		}
		if k := c.Table.KeyColumns(); len(k) != 1 || k[0].Name != "id" {
			t.Errorf("change %d: key %v, want id", i, k)
		}
	}
	// The catalog's columns now, numbered alike, the dropped one marked.
	attrs, err := (&streamSource{src: src}).Attributes(ctx, tbl.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for n := int16(1); n <= 6; n++ {
		a := attrs[n]
		got = append(got, a.Name+map[bool]string{true: " dropped"}[a.Dropped])
	}
	if want := []string{"id", "v2", "n", "d dropped", "x", "e"}; !slices.Equal(got, want) {
		t.Errorf("attributes %q, want %q", got, want)
	}
}

// TestStreamReplayAcrossRename: rows read again from before a rename the
// catalog already shows (a restart from an older position) carry the old
// column without a number, which the applier leaves out, instead of a new
// column the destination would add.
func TestStreamReplayAcrossRename(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE q (id int PRIMARY KEY, old int)")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, err := src.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, root, "INSERT INTO q VALUES (1, 1)", "ALTER TABLE q RENAME COLUMN old TO new", "INSERT INTO q VALUES (2, 2)")
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "q"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan change.Event, 10)
	done := make(chan error, 1)
	go func() { done <- src.Stream(ctx, start, func(change.TableID) *change.Table { return tbl }, out) }()
	txns := receiveTxns(t, out, done, 2)
	if got, want := columnsOf(txns[0].Changes[0].Table), "1:id integer, 0:old integer"; got != want {
		t.Errorf("the row before the rename: shape %s, want %s", got, want)
	}
	if got := txns[1].Changes[0].Table; got != tbl {
		t.Errorf("the row after the rename: shape %s, want the described table", columnsOf(got))
	}
}

// TestStreamShapeUCA1400: MariaDB lists its uca1400 collations without an
// id in COLLATIONS, so a table map's collation id for them is looked up in
// COLLATION_CHARACTER_SET_APPLICABILITY: an unchanged table keyed under
// one keeps the described table (not a key "widened" to its bytes), and
// after a DDL the table map's shape names the collation and length.
func TestStreamShapeUCA1400(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE u (k varchar(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci PRIMARY KEY, g varchar(10) COLLATE utf8mb4_general_ci)")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "u"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, done := streamFromNow(ctx, t, src, tbl)
	exec(t, root, `INSERT INTO u VALUES ('aß', 'x')`, "ALTER TABLE u ADD COLUMN n int", `INSERT INTO u VALUES ('b', 'y', 1)`)
	txns := receiveTxns(t, out, done, 2)
	if got := txns[0].Changes[0].Table; got != tbl {
		t.Errorf("an unchanged table's change carries %s, want the described %s", columnsOf(got), columnsOf(tbl))
	}
	after := txns[1].Changes[0].Table
	if got, want := columnsOf(after), "1:k character varying(24), 2:g character varying(10), 3:n integer"; got != want {
		t.Errorf("after the DDL: %s, want %s", got, want)
	}
	if k := after.Columns[0]; k.Collation != "utf8mb4_uca1400_ai_ci" {
		t.Errorf("after the DDL the key's collation is %q", k.Collation)
	}
}
