package pgbinary

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

func cols(oids ...uint32) []change.Column {
	out := make([]change.Column, len(oids))
	for i, oid := range oids {
		out[i] = change.Column{Name: "c" + strconv.Itoa(i), TypeOID: oid}
	}
	return out
}

func TestTableOK(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    change.Table
		want bool
	}{
		{"int key, built-in values", change.Table{Columns: cols(int8OID, timestamptzOID, jsonbOID, 1009), Key: []int{0}}, true},
		{"uuid and text key", change.Table{Columns: cols(uuidOID, textOID, numericOID), Key: []int{1, 0}}, true},
		{"no key", change.Table{Columns: cols(int8OID)}, false},
		{"numeric key", change.Table{Columns: cols(numericOID, textOID), Key: []int{0}}, false},
		{"a user type", change.Table{Columns: cols(int8OID, 16385), Key: []int{0}}, false},
		{"money", change.Table{Columns: cols(int8OID, 790), Key: []int{0}}, false},
		{"regclass", change.Table{Columns: cols(int8OID, 2205), Key: []int{0}}, false},
	} {
		if got := TableOK(&tc.t); got != tc.want {
			t.Errorf("%s: TableOK = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// tuple decodes one binary COPY tuple into its fields (nil for NULL).
func tuple(t *testing.T, b []byte) [][]byte {
	t.Helper()
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	var out [][]byte
	for range n {
		size := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		if size < 0 {
			out = append(out, nil)
			continue
		}
		out = append(out, b[:size])
		b = b[size:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the tuple", len(b))
	}
	return out
}

func TestAppendRow(t *testing.T) {
	c := cols(int2OID, int4OID, int8OID, uuidOID, textOID, timestamptzOID)
	isKey := []bool{true, true, true, true, true, false}
	raw := string([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	row := change.Row{change.Text("-2"), change.Text("70000"), change.Text("-9000000000"),
		change.Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), change.Text("k\tey"), {Text: raw, Binary: true}}
	got, ok, err := AppendRow([]byte("x"), row, c, isKey)
	if err != nil || !ok {
		t.Fatalf("AppendRow: ok %v, %v", ok, err)
	}
	if got[0] != 'x' {
		t.Fatal("AppendRow overwrote buf")
	}
	fields := tuple(t, got[1:])
	uuid, _ := hex.DecodeString("a0eebc999c0b4ef8bb6d6bb9bd380a11")
	want := [][]byte{{0xff, 0xfe}, {0, 1, 0x11, 0x70}, binary.BigEndian.AppendUint64(nil, uint64(^uint64(9000000000-1))), uuid, []byte("k\tey"), []byte(raw)}
	for i := range want {
		if !bytes.Equal(fields[i], want[i]) {
			t.Errorf("field %d = %x, want %x", i, fields[i], want[i])
		}
	}

	// A NULL, a text value where binary is needed, a bad key.
	row[5] = change.Null
	if got, ok, err := AppendRow(nil, row, c, isKey); err != nil || !ok || tuple(t, got)[5] != nil {
		t.Errorf("NULL value: ok %v, %v", ok, err)
	}
	row[5] = change.Text("2024-01-01 00:00:00+00")
	if got, ok, err := AppendRow([]byte("x"), row, c, isKey); err != nil || ok || string(got) != "x" {
		t.Errorf("text value: %q, ok %v, %v; want buf as it was, not ok", got, ok, err)
	}
	row[5] = change.Value{Unchanged: true}
	if _, ok, err := AppendRow(nil, row, c, isKey); err != nil || ok {
		t.Errorf("unchanged value: ok %v, %v", ok, err)
	}
	for i, bad := range []string{"70000", "x", "-9223372036854775809", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g", "a0eebc999c0b4ef8bb6d6bb9bd380a11"} {
		k := []int{0, 1, 2, 3, 3}[i]
		r := append(change.Row(nil), row...)
		r[5] = change.Null
		r[k] = change.Text(bad)
		if got, _, err := AppendRow([]byte("x"), r, c, isKey); err == nil || string(got) != "x" || !strings.Contains(err.Error(), "c"+strconv.Itoa(k)) {
			t.Errorf("key %q in column %d: %q, %v; want an error naming the column, buf as it was", bad, k, got, err)
		}
	}
}

// FuzzAppendKey checks the integer and uuid keys' binary forms against
// their text: what is encoded decodes to the value the text says, and what
// the text cannot say is refused.
func FuzzAppendKey(f *testing.F) {
	for _, s := range []string{"0", "-1", "32767", "-32768", "2147483648", "9223372036854775807", "+5", " 1", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, oid := range []uint32{int2OID, int4OID, int8OID} {
			bits := map[uint32]int{int2OID: 16, int4OID: 32, int8OID: 64}[oid]
			want, perr := strconv.ParseInt(text, 10, bits)
			got, err := appendKey(nil, oid, text)
			if (err == nil) != (perr == nil) {
				t.Fatalf("oid %d, %q: error %v, ParseInt's %v", oid, text, err, perr)
			}
			if err != nil {
				continue
			}
			size := int(binary.BigEndian.Uint32(got))
			if size != bits/8 || len(got) != 4+size {
				t.Fatalf("oid %d, %q: %x", oid, text, got)
			}
			var n int64
			for _, b := range got[4:] {
				n = n<<8 | int64(b)
			}
			n = n << (64 - bits) >> (64 - bits) // sign-extend
			if n != want {
				t.Fatalf("oid %d, %q: encodes %d", oid, text, n)
			}
		}
		got, err := appendKey(nil, uuidOID, text)
		if err != nil {
			return
		}
		if len(got) != 20 || hex.EncodeToString(got[4:]) != strings.ReplaceAll(strings.ToLower(text), "-", "") {
			t.Fatalf("uuid %q: %x", text, got)
		}
	})
}
