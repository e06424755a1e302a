package mysql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/source"
)

// typesTable and typesRows hold every supported type at its edges (shared
// with the stream package's end-to-end type test).
var (
	typesTable = mysqlserver.TypesTable
	typesRows  = mysqlserver.TypesRows
)

var maxDecimal = strings.Repeat("9", 35) + "." + strings.Repeat("9", 30)

// wantTypes are the PostgreSQL text forms of typesRows, column by column;
// the LONGBLOB is checked by its hash.
var wantTypes = [][]string{
	{"1", "127", "255", "32767", "65535", "8388607", "16777215", "2147483647", "4294967295",
		"9223372036854775807", "18446744073709551615", maxDecimal,
		"3.40282e+38", "1.7976931348623157e+308", strings.Repeat("1", 64), "1", "2155",
		"9999-12-31", "9999-12-31 23:59:59.999999", "2038-01-19 03:14:07.999999+00", "838:59:59", "-838:59:58.999999",
		"ab", "😀🎉 x", "a'b\\ \n", "€ÿé", `\x01020000`, `\x00ff`, `\x`, "sha256:" + longBlobHash(),
		"b'c", "x,z", `{"a": [1, 2.50, "é"]}`, `\x0101000000000000000000f03f0000000000000040`},
	{"2", "-128", "0", "-32768", "0", "-8388608", "0", "-2147483648", "0",
		"-9223372036854775808", "0", "-" + maxDecimal,
		"-0.1", "2.2250738585072014e-308", strings.Repeat("0", 64), "0", "1901",
		"1000-01-01", "1000-01-01 00:00:00", "1970-01-01 00:00:01+00", "-838:59:59", "00:00:00.5",
		"", "Ünïcödé", "", "a", `\x00000000`, `\x`, `\x00`, "sha256:" + hashText(`\x`),
		"é", "", "[]", `\x0101000000` + strings.Repeat("0", 32)},
}

func longBlobHash() string { return hashText(`\x` + strings.Repeat("00ff", 8388608)) }

func hashText(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestTypeValues reads every supported type at its edges from a real server
// and compares the text of each value with PostgreSQL's text form of it.
func TestTypeValues(t *testing.T) {
	src, _ := testDB(t, append([]string{typesTable}, typesRows...)...)
	ctx := context.Background()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "types"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := readAll(t, src, tbl)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for r, want := range wantTypes {
		for i, w := range want {
			got := rows[r][i]
			text := got.Text
			if strings.HasPrefix(w, "sha256:") {
				text = "sha256:" + hashText(text)
			}
			if got.Null || text != w {
				t.Errorf("row %d column %s (%s): got %q (null %v), want %q", r+1, tbl.Columns[i].Name, tbl.Columns[i].Type, clip(text), got.Null, clip(w))
			}
		}
	}
	// Every value is in its tag's canonical form, which is what sinks read.
	for _, row := range rows {
		for i, v := range row {
			if c := tbl.Columns[i]; !v.Null {
				if err := change.Canonical(change.TagOf(c), v.Text); err != nil {
					t.Errorf("column %s (%s): %v", c.Name, c.Native, clipErr(err))
				}
			}
		}
	}
	// And every row makes a valid event (docs/events.md).
	typ, err := source.Lookup("mysql")
	if err != nil {
		t.Fatal(err)
	}
	enc := typ.Encoder("s", "db", false, "test")
	for r, row := range rows {
		m, err := enc.Row(tbl, row, event.Origin{})
		if err != nil || !json.Valid(m.Value) || !json.Valid(m.Key) {
			t.Errorf("row %d: event %v: %s", r+1, err, clip(string(m.Value)))
		}
	}
	for i, v := range rows[2][1:] {
		if !v.Null {
			t.Errorf("row 3 column %s: got %q, want NULL", tbl.Columns[i+1].Name, v.Text)
		}
	}
}

func clipErr(err error) string { return clip(err.Error()) }

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// readAll reads every row of a table in key order through the chunk path's
// row reader.
func readAll(t *testing.T, src *Source, tbl *change.Table) []change.Row {
	t.Helper()
	r, err := newRowReader(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var rows []change.Row
	err = src.with(context.Background(), func(c *client.Conn) (err error) {
		rows, _, err = r.selectRows(c, "SELECT "+selectList(tbl)+" FROM "+quoteTable(tbl.ID)+" ORDER BY "+keyList(tbl))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestColumnTypes checks the PostgreSQL type each MySQL type maps to.
func TestColumnTypes(t *testing.T) {
	src, _ := testDB(t, typesTable)
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "types"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		oid uint32
		mod int32
	}{
		"ti": {oidInt2, -1}, "tiu": {oidInt2, -1}, "siu": {oidInt4, -1}, "iu": {oidInt8, -1},
		"biu": {oidNumeric, 20<<16 + 4}, "d": {oidNumeric, 65<<16 | 30 + 4}, "f": {oidFloat4, -1},
		"db": {oidFloat8, -1}, "b": {oidBit, 64}, "y": {oidInt2, -1}, "dt": {oidDate, -1},
		"dtm": {oidTimestamp, 6}, "ts": {oidTimestamptz, 6}, "tm": {oidInterval, 0x7FFF << 16},
		"c": {oidVarchar, 14}, "vc": {oidVarchar, 24}, "tx": {oidText, -1}, "bn": {oidBytea, -1},
		"lb": {oidBytea, -1}, "e": {oidText, -1}, "s": {oidText, -1}, "j": {oidJSON, -1}, "g": {oidBytea, -1},
	}
	for _, c := range tbl.Columns {
		w, ok := want[c.Name]
		if ok && (c.TypeOID != w.oid || c.BaseOID != w.oid || c.TypeMod != w.mod) {
			t.Errorf("column %s (%s): oid %d mod %d, want %d %d", c.Name, c.Type, c.TypeOID, c.TypeMod, w.oid, w.mod)
		}
	}
	// The neutral tag agrees with the PostgreSQL type the values are
	// written as, so both destinations store them alike.
	for _, c := range tbl.Columns {
		if c.Tag == change.TagOther || c.Tag != change.PostgresTag(c.TypeOID) {
			t.Errorf("column %s (%s): tag %s, written as %s (tag %s)", c.Name, c.Native, c.Tag, c.Type, change.PostgresTag(c.TypeOID))
		}
	}
	if c := tbl.Columns[tbl.ColumnIndex("biu")]; c.Native != "bigint(20) unsigned" || c.Type != "numeric(20,0)" {
		t.Errorf("biu native type %q, type %q, want bigint(20) unsigned written as numeric(20,0)", c.Native, c.Type)
	}
	for name, want := range map[string]string{"d": "numeric(65,30)", "dtm": "timestamp(6) without time zone",
		"ts": "timestamp(6) with time zone", "tm": "interval(0)", "vc": "character varying(20)", "b": "bit(64)"} {
		if c := tbl.Columns[tbl.ColumnIndex(name)]; c.Type != want {
			t.Errorf("column %s (%s) is written as %q, want %q", name, c.Native, c.Type, want)
		}
	}
	if c := tbl.Columns[tbl.ColumnIndex("l1")]; c.Collation != "latin1_swedish_ci" || c.ByteOrder {
		t.Errorf("l1 collation %q byte order %v", c.Collation, c.ByteOrder)
	}
}
