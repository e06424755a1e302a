package event

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// TestRowHead: a row's head holds what Row's event holds besides its
// after, and its Frame plus AppendRow's length is that event's length
// (what max_file_bytes counts of a Parquet file's rows); AppendRow refuses
// what Row refuses.
func TestRowHead(t *testing.T) {
	tbl := customers("public")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	enc := &Encoder{Connector: "postgresql", DB: "shop", SchemaField: true, Now: func() time.Time { return at }}
	o := Origin{Position: 99, CommitTime: at}
	h, err := enc.RowHead(tbl, o)
	if err != nil {
		t.Fatal(err)
	}
	if h.Op != OpRead || h.TsMs != at.UnixMilli() {
		t.Errorf("head %+v, want op r at %d", h, at.UnixMilli())
	}
	for _, r := range []change.Row{
		{change.Text("7"), change.Text("A"), change.Null, change.Text("a@x")},
		{change.Text("-9223372036854775808"), change.Text(`quote " and \ and é`), change.Text(""), change.Null},
	} {
		m, err := enc.Row(tbl, r, o)
		if err != nil {
			t.Fatal(err)
		}
		after, err := AppendRow([]byte("left over"), tbl, r)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Frame + len(after) - len("left over"); got != len(m.Value) {
			t.Errorf("Frame + row = %d bytes, Row's event %d: %s", got, len(m.Value), m.Value)
		}
		var ev struct {
			Source json.RawMessage `json:"source"`
			TsMs   int64           `json:"ts_ms"`
		}
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			t.Fatal(err)
		}
		if string(ev.Source) != string(h.Source) || ev.TsMs != h.TsMs {
			t.Errorf("head source %s at %d, Row's event %s at %d", h.Source, h.TsMs, ev.Source, ev.TsMs)
		}
	}
	bad := change.Row{change.Text("seven"), change.Text("A"), change.Null, change.Text("a@x")}
	if _, err := enc.Row(tbl, bad, o); err == nil {
		t.Fatal("Row took an integer column's value seven")
	}
	if _, err := AppendRow(nil, tbl, bad); err == nil {
		t.Error("AppendRow took what Row refuses")
	}
}

// FuzzAppendString: appendString writes every string as encoding/json
// does, byte for byte (its fast path is plain ASCII only).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `quote " back \ slash`, "<a href='x'>&amp;</a>", "tab\there\nnl", "é ü 中文",
		"\u2028\u2029", "\x7f del", "\xff invalid utf-8", "\x00 nul"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendString(%q) = %s, encoding/json %s", s, got[1:], want)
		}
	})
}
