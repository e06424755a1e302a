package files

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
	_ "github.com/tidemark/tidemark/internal/source/pg" // the configs name a PostgreSQL source
)

// numeric is a numeric(p,s) column's type modifier.
func numeric(p, s int32) int32 { return p<<16 | s + 4 }

// every has a column of each tag, decimals with and without a precision.
var every = &change.Table{ID: change.TableID{Schema: "public", Name: "every"}, Key: []int{0}, Columns: []change.Column{
	{Name: "id", Tag: change.TagInt64},
	{Name: "b", Tag: change.TagBool},
	{Name: "i16", Tag: change.TagInt16},
	{Name: "i32", Tag: change.TagInt32},
	{Name: "i64", Tag: change.TagInt64},
	{Name: "dec", Tag: change.TagDecimal, TypeOID: 1700, BaseOID: 1700, TypeMod: numeric(10, 2)},
	{Name: "dec18", Tag: change.TagDecimal, TypeOID: 1700, BaseOID: 1700, TypeMod: numeric(18, 0)},
	{Name: "dec38", Tag: change.TagDecimal, TypeOID: 1700, BaseOID: 1700, TypeMod: numeric(38, 6)},
	{Name: "decany", Tag: change.TagDecimal, TypeOID: 1700, BaseOID: 1700, TypeMod: -1},
	{Name: "f32", Tag: change.TagFloat32},
	{Name: "f64", Tag: change.TagFloat64},
	{Name: "txt", Tag: change.TagText},
	{Name: "bin", Tag: change.TagBytes},
	{Name: "d", Tag: change.TagDate},
	{Name: "tm", Tag: change.TagTime},
	{Name: "tmtz", Tag: change.TagTimeTZ},
	{Name: "ts", Tag: change.TagTimestamp, TypeMod: -1},
	{Name: "ts3", Tag: change.TagTimestamp, TypeMod: 3},
	{Name: "tstz", Tag: change.TagTimestampTZ},
	{Name: "iv", Tag: change.TagInterval},
	{Name: "js", Tag: change.TagJSON},
	{Name: "u", Tag: change.TagUUID},
	{Name: "bits", Tag: change.TagBits, TypeMod: 4},
	{Name: "arr", Tag: change.TagArray},
	{Name: "oth", Tag: change.TagOther},
}}

// edgeRows are rows of every at the edges of each column's Parquet type,
// and past them (the last row: out of range, kept as text).
var edgeRows = [][]string{
	{"1", "f", "-32768", "-2147483648", "-9223372036854775808", "-99999999.99", "-999999999999999999",
		"-99999999999999999999999999999999.999999", "-0.000001", "-3.4028235e+38", "-1.7976931348623157e+308",
		"", `\x`, "0001-01-01", "00:00:00", "00:00:00-15:59", "0001-01-01 00:00:00", "0001-01-01 00:00:00",
		"0001-01-01 00:00:00+00", "-178000000 years", "null", "00000000-0000-0000-0000-000000000000", "0000", "{}", ""},
	{"2", "t", "32767", "2147483647", "9223372036854775807", "99999999.99", "999999999999999999",
		"99999999999999999999999999999999.999999", "123456789012345678901234567890.5", "1e-45", "5e-324",
		"ünï \"q\" <&>\n", `\x00ff7f80`, "9999-12-31", "23:59:59.999999", "23:59:59.999999+15:59",
		"9999-12-31 23:59:59.999999", "9999-12-31 23:59:59.999", "9999-12-31 23:59:59.999999+00",
		"1 year -2 mons +3 days -04:05:06.78", `{"a":[1,2.5,{"b":null}],"c":"\u00e9"}`,
		"ffffffff-ffff-ffff-ffff-ffffffffffff", "1111", `{{1,2},{3,NULL}}`, "(1,\"x\")"},
	{"3", "f", "0", "0", "0", "0.00", "0", "0.000000", "0", "NaN", "-Infinity",
		"x", `\x00`, "1970-01-01", "12:00:00.5", "12:00:00+00", "1970-01-01 00:00:00", "1969-12-31 23:59:59.999",
		"1969-12-31 23:59:59.000001+00", "00:00:00", "[]", "123e4567-e89b-12d3-a456-426614174000", "0101", "{}", "x"},
	{"4", "t", "1", "1", "1", "NaN", "Infinity", "-Infinity", "NaN", "Infinity", "NaN",
		"y", `\xff`, "infinity", "24:00:00", "24:00:00+00", "infinity", "-infinity",
		"-infinity", "1 day", `"s"`, "123e4567-e89b-12d3-a456-426614174000", "1", "{}", "y"},
	{"5", "t", "1", "1", "1", "1.5", "1", "1.000000", "1", "1.1", "0.1",
		"z", `\x01`, "10000-01-01", "00:00:01", "00:00:01+01", "2000-01-01 00:00:00 BC", "10000-01-01 00:00:00",
		"0044-03-15 12:00:00+00 BC", "1 day", "1", "123e4567-e89b-12d3-a456-426614174000", "1", "{}", "z"},
}

func edgeRow(t *testing.T, vals []string) change.Row {
	t.Helper()
	row := make(change.Row, len(vals))
	for i, v := range vals {
		if err := change.Canonical(change.TagOf(every.Columns[i]), v); err != nil {
			t.Fatalf("test row %s, column %s: %v", vals[0], every.Columns[i].Name, err)
		}
		row[i] = change.Text(v)
	}
	return row
}

// typeBatches writes rows of every at their edges, nulls, an update
// leaving a value unchanged, a delete, a key move and a backfill chunk.
func typeBatches(t *testing.T) []*sink.Batch {
	var ops []sink.Op
	for _, vals := range edgeRows {
		ops = append(ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: every, Row: edgeRow(t, vals)}})
	}
	nulls := make(change.Row, len(every.Columns))
	for i := range nulls {
		nulls[i] = change.Null
	}
	nulls[0] = change.Text("6")
	ops = append(ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: every, Row: nulls}})
	ops = append([]sink.Op{{Change: &change.Change{Kind: change.Truncate, Table: every}}}, ops...)
	updated := edgeRow(t, edgeRows[1])
	updated[11], updated[12] = change.Value{Unchanged: true}, change.Value{Unchanged: true}
	moved := edgeRow(t, edgeRows[2])
	moved[0] = change.Text("30")
	chunkRows := []change.Row{edgeRow(t, edgeRows[0]), edgeRow(t, edgeRows[3])}
	return []*sink.Batch{
		{Stream: "s", Position: 10, Ops: ops},
		{Stream: "s", Position: 20, Resume: "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", Ops: []sink.Op{
			{Change: &change.Change{Kind: change.Update, Table: every, Row: updated}},
			{Change: &change.Change{Kind: change.Delete, Table: every, OldKey: change.Key{change.Text("4")}}},
			{Change: &change.Change{Kind: change.Update, Table: every, OldKey: change.Key{change.Text("3")}, Row: moved}},
		}},
		{Stream: "s", Position: 20, Ops: []sink.Op{{Chunk: &sink.Chunk{Table: every, BackfillID: 2, Keep: false,
			Low: change.Key{change.Text("0")}, High: change.Key{change.Text("4")}, Rows: chunkRows}}}},
	}
}

// typesEncoder has source fields of every kind, one of them null until
// the resume token is set.
func typesEncoder() *event.Encoder {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &event.Encoder{Connector: "mysql", Name: "s", DB: "shop", Version: "t", Now: func() time.Time { return at },
		Fields: func(o event.Origin) []event.Field {
			var gtid any
			if o.Resume != "" {
				gtid = o.Resume
			}
			return []event.Field{{Name: "gtid", Value: gtid}, {Name: "file", Value: "binlog.000001"},
				{Name: "pos", Value: uint32(o.Position)}, {Name: "snapshotted", Value: o.Backfill}}
		}}
}

// writeTypes writes typeBatches in a format and returns the directory.
func writeTypes(t *testing.T, format string) string {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenFormat(dir, format, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.UseEncoder(typesEncoder())
	s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC) }
	for _, b := range typeBatches(t) {
		if err := s.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fileEvents lists the events of a table's data files, in file order:
// a JSONL file's lines, a Parquet file's rows as the reader rebuilds them.
func fileEvents(t *testing.T, dir string, id change.TableID) (files, events []string) {
	t.Helper()
	err := filepath.WalkDir(tableDir(filepath.Join(dir, "s"), id), func(path string, d fs.DirEntry, err error) error {
		if _, ok := seqOf(d.Name()); ok && err == nil {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(files, func(i, j int) bool { return filepath.Base(files[i]) < filepath.Base(files[j]) })
	for _, f := range files {
		events = append(events, eventsOf(t, f)...)
	}
	return files, events
}

// eventsOf lists a data file's events.
func eventsOf(t *testing.T, f string) (events []string) {
	t.Helper()
	if filepath.Ext(f) == ".parquet" {
		if err := parquetEvents(f, func(b []byte) error { events = append(events, string(b)); return nil }); err != nil {
			t.Fatal(err)
		}
		return events
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// sameEvents checks that two formats' files hold the same events.
func sameEvents(t *testing.T, jsonl, pq []string) {
	t.Helper()
	if len(jsonl) != len(pq) {
		t.Fatalf("%d events in the JSONL files, %d in the Parquet files", len(jsonl), len(pq))
	}
	for i := range jsonl {
		if jsonl[i] != pq[i] {
			t.Errorf("event %d:\n jsonl   %s\n parquet %s", i, jsonl[i], pq[i])
		}
	}
}

// TestParquetTypes writes a column of every tag at the edges of its
// Parquet type and past them, nulls, an update leaving values unchanged,
// a delete, a key move and a backfill chunk, as JSONL and as Parquet:
// the Parquet files read back to the JSONL files' events byte for byte,
// and the reference consumer holds the same rows from both.
func TestParquetTypes(t *testing.T) {
	jdir, pdir := writeTypes(t, FormatJSONL), writeTypes(t, FormatParquet)
	jfiles, jev := fileEvents(t, jdir, every.ID)
	pfiles, pev := fileEvents(t, pdir, every.ID)
	if len(pfiles) != len(jfiles) || len(pfiles) != 3 {
		t.Fatalf("%d Parquet files, %d JSONL files; want 3 of each", len(pfiles), len(jfiles))
	}
	for _, f := range pfiles {
		if filepath.Ext(f) != ".parquet" {
			t.Errorf("%s: want a .parquet file", f)
		}
	}
	sameEvents(t, jev, pev)
	jr, err := ReadTable(jdir, "s", every)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := ReadTable(pdir, "s", every)
	if err != nil {
		t.Fatal(err)
	}
	// 1, 2, 3, 4, 5 and 6 inserted; 4 deleted and 3 moved to 30; the
	// chunk (0,4] resends 1 and 4, dropping 2.
	if pr.Len() != 5 || !reflect.DeepEqual(jr.Rows(), pr.Rows()) {
		t.Errorf("the replica of the Parquet files holds %d rows, want 5 and the JSONL files' rows:\n%s\n%s", pr.Len(), dump(pr.Rows()), dump(jr.Rows()))
	}
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestParquetLogicalTypes opens a Parquet file with parquet-go's own
// reader: each column has the type docs/destinations.md gives its tag,
// typed values read as such, and values past a type's range are null in
// their column and kept as text in out_of_range.
func TestParquetLogicalTypes(t *testing.T) {
	files, _ := fileEvents(t, writeTypes(t, FormatParquet), every.ID)
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	schema := pf.Schema().String()
	for col, want := range map[string]string{
		"id": "int64 id (INT(64,true))", "b": "boolean b", "i16": "int32 i16 (INT(16,true))",
		"i32": "int32 i32 (INT(32,true))", "i64": "int64 i64 (INT(64,true))",
		"dec": "int64 dec (DECIMAL(10,2))", "dec18": "int64 dec18 (DECIMAL(18,0))",
		"dec38": "fixed_len_byte_array(16) dec38 (DECIMAL(38,6))", "decany": "binary decany (STRING)",
		"f32": "float f32", "f64": "double f64", "txt": "binary txt (STRING)", "bin": "binary bin;",
		"d": "int32 d (DATE)", "tm": "int64 tm (TIME(isAdjustedToUTC=false,unit=MICROS))",
		"tmtz": "binary tmtz (STRING)", "ts": "int64 ts (TIMESTAMP(isAdjustedToUTC=false,unit=MICROS))",
		"tstz": "int64 tstz (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS))", "iv": "binary iv (STRING)",
		"js": "binary js (JSON)", "u": "fixed_len_byte_array(16) u (UUID)", "bits": "binary bits (STRING)",
		"arr": "binary arr (STRING)", "oth": "binary oth (STRING)",
		"op": "binary op (STRING)", "out_of_range": "binary out_of_range (JSON)", "chunk low": "binary low (JSON)",
	} {
		if !strings.Contains(schema, "optional "+want) {
			t.Errorf("column %s: the schema lacks %q:\n%s", col, "optional "+want, schema)
		}
	}
	r := parquet.NewGenericReader[any](f, pf.Schema())
	defer r.Close()
	rows := make([]any, 10)
	n, _ := r.Read(rows)
	if n != 7 { // the truncate, five rows and the row of nulls
		t.Fatalf("%d rows, want 7", n)
	}
	high := rows[2].(map[string]any)["after"].(map[string]any)
	if high["tstz"] != int64(253402300799999999) || high["d"] != int32(2932896) || high["i16"] != int32(32767) {
		t.Errorf("9999-12-31 23:59:59.999999+00, 9999-12-31 and 32767 read as %v, %v, %v", high["tstz"], high["d"], high["i16"])
	}
	past := rows[4].(map[string]any)
	if after := past["after"].(map[string]any); after["ts"] != nil || after["dec"] != nil || after["tm"] != nil {
		t.Errorf("values past their type's range are not null in their columns: %v", after)
	}
	want := `{"after":{"d":"infinity","dec":"NaN","dec18":"Infinity","dec38":"-Infinity","tm":"24:00:00","ts":"infinity","ts3":"-infinity","tstz":"-infinity"}}`
	if got := dump(past["out_of_range"]); got != want {
		t.Errorf("out_of_range %s, want %s", got, want)
	}
}

// TestParquetSchemaChange: a batch whose table changes shape midway ends
// its Parquet file there and goes on in a file of the new schema; the
// events read back as JSONL's.
func TestParquetSchemaChange(t *testing.T) {
	wider := &change.Table{ID: table.ID, Key: []int{0}, Columns: append(append([]change.Column{}, table.Columns...),
		change.Column{Name: "w", Tag: change.TagDate})}
	ops := inserts(0, 3)
	for i := 3; i < 6; i++ {
		ops = append(ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: wider,
			Row: change.Row{change.Text(fmt.Sprint(i)), change.Null, change.Text("2024-02-29")}}})
	}
	events := map[string][]string{}
	for _, format := range formats {
		dir := t.TempDir()
		s := open(t, dir, format)
		s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC) }
		s.enc.Now = s.now
		if err := s.Apply(context.Background(), &sink.Batch{Stream: "s", Position: 5, Ops: ops}); err != nil {
			t.Fatal(err)
		}
		files, evs := fileEvents(t, dir, table.ID)
		events[format] = evs
		if want := map[string]int{FormatJSONL: 1, FormatParquet: 2}[format]; len(files) != want {
			t.Errorf("%s: %d files, want %d", format, len(files), want)
		}
		if r, err := ReadTable(dir, "s", wider); err != nil || r.Len() != 6 {
			t.Errorf("%s: the reader holds %d rows (%v), want 6", format, r.Len(), err)
		}
	}
	sameEvents(t, events[FormatJSONL], events[FormatParquet])
}

// TestFormatConfig: the format key takes jsonl or parquet, and refuses
// anything else saying what to use.
func TestFormatConfig(t *testing.T) {
	for format, want := range map[string]string{
		"jsonl": "", "parquet": "", `""`: "",
		"csv":                 `"csv" is not a format the files destination writes: use jsonl (the default) or parquet`,
		"PARQUET":             `"PARQUET" is not a format`,
		`"parquet; rm -rf /"`: `"parquet; rm -rf /" is not a format`,
		`"../jsonl"`:          `"../jsonl" is not a format`,
	} {
		_, err := config.Parse(fmt.Appendf(nil, `
streams:
  - name: s
    source: {dsn: "postgres://db/x"}
    destination: {type: files, path: /tmp/x, format: %s}
    include: [public.*]
`, format), func(string) (string, bool) { return "", false })
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), "streams[0].destination.format: "+want)) {
			t.Errorf("format %s: %v, want %q", format, err, want)
		}
	}
}

// TestBackfillPartsAlike: a chunk's rows reach Parquet without their
// events' JSON, yet max_file_bytes counts that JSON for both formats: a
// chunk larger than the limit splits into the same parts, holding the
// same events, as JSONL and as Parquet.
func TestBackfillPartsAlike(t *testing.T) {
	t.Parallel()
	parts := map[string][]string{}
	perPart := map[string][][]string{} // each part's events
	var events [2][]string
	for i, format := range formats {
		dir := t.TempDir()
		s := openFixed(t, dir, format)
		c := &sink.Chunk{Table: table, BackfillID: 1, Low: change.Key{change.Text("0")}, High: change.Key{change.Text("1000")}}
		for id := 1; id <= 1000; id++ {
			c.Rows = append(c.Rows, change.Row{change.Text(strconv.Itoa(id)), change.Text(strings.Repeat("x", 100+id%50))})
		}
		if err := s.Apply(context.Background(), &sink.Batch{Stream: "s", Position: 10, Ops: []sink.Op{{Chunk: c}}}); err != nil {
			t.Fatal(err)
		}
		files, evs := fileEvents(t, dir, table.ID)
		for _, f := range files {
			parts[format] = append(parts[format], strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)))
			perPart[format] = append(perPart[format], eventsOf(t, f))
		}
		events[i] = evs
	}
	if len(parts[FormatJSONL]) < 3 || !slices.Equal(parts[FormatJSONL], parts[FormatParquet]) {
		t.Errorf("a chunk of about 390 KB of events in parts of %d bytes: JSONL %q, Parquet %q; want the same parts, three or more",
			minFileBytes, parts[FormatJSONL], parts[FormatParquet])
	}
	sameEvents(t, events[0], events[1])
	for i := range min(len(perPart[FormatJSONL]), len(perPart[FormatParquet])) {
		if j, p := perPart[FormatJSONL][i], perPart[FormatParquet][i]; len(j) == 0 || len(j) != len(p) || j[0] != p[0] {
			t.Errorf("part %d: JSONL holds %d events from %.40s, Parquet %d from %.40s", i+1, len(j), first(j), len(p), first(p))
		}
	}
}

// TestParquetSourcePerEvent: changes of two transactions in one batch go
// to one file, each with its own source block (the same length, other
// values): Parquet holds each event's, as JSONL does.
func TestParquetSourcePerEvent(t *testing.T) {
	t.Parallel()
	var events [2][]string
	for i, format := range formats {
		dir := t.TempDir()
		s := openFixed(t, dir, format)
		b := &sink.Batch{Stream: "s", Position: 20}
		for n := range 4 {
			txn := &change.Txn{Xid: uint32(700 + n/2), CommitLSN: change.LSN(11 + n/2), CommitTime: time.Date(2026, 1, 2, 3, 0, n/2, 0, time.UTC)}
			b.Ops = append(b.Ops, sink.Op{Txn: txn, Change: &change.Change{Kind: change.Insert, Table: table,
				Row: change.Row{change.Text(strconv.Itoa(n)), change.Text("v")}}})
		}
		if err := s.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		files, evs := fileEvents(t, dir, table.ID)
		if len(files) != 1 || len(evs) != 4 {
			t.Fatalf("%s: %d files, %d events; want one file of 4", format, len(files), len(evs))
		}
		events[i] = evs
	}
	if events[0][1] == events[0][2] || !strings.Contains(events[0][2], `"pos":12`) {
		t.Fatalf("the two transactions' events do not differ as meant: %s, %s", events[0][1], events[0][2])
	}
	sameEvents(t, events[0], events[1])
}

// openFixed opens the destination in dir with typesEncoder and a fixed
// clock, in parts of minFileBytes.
func openFixed(t *testing.T, dir, format string) *Sink {
	t.Helper()
	s, err := OpenFormat(dir, format, minFileBytes)
	if err != nil {
		t.Fatal(err)
	}
	s.UseEncoder(typesEncoder())
	s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC) }
	return s
}

// first is a list's first event, "" for none.
func first(events []string) string {
	if len(events) == 0 {
		return ""
	}
	return events[0]
}
