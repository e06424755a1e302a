package mysql

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
)

// TestTemporalMatchesServerText reads temporal values at their edges raw,
// as a chunk read does, and compares each with the codec's text of the
// server's own text for the same value (the text protocol's).
func TestTemporalMatchesServerText(t *testing.T) {
	src, root := testDB(t,
		"SET SESSION sql_mode = ''",
		"CREATE TABLE tv (id int PRIMARY KEY, d date, dt0 datetime, dt3 datetime(3), dt6 datetime(6),"+
			" ts0 timestamp NULL, ts6 timestamp(6) NULL, tm0 time, tm6 time(6))",
		"INSERT INTO tv VALUES"+
			" (1, '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.000', '1000-01-01 00:00:00.000000',"+
			"  '1970-01-01 00:00:01', '1970-01-01 00:00:01.000000', '-838:59:59', '-838:59:59.000000'),"+
			" (2, '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999',"+
			"  '2038-01-19 03:14:07', '2038-01-19 03:14:07.999999', '838:59:59', '838:59:59.999999'),"+
			" (3, '2024-02-29', '2024-02-29 12:00:00', '2024-02-29 12:00:00.100', '2024-02-29 12:00:00.000001',"+
			"  '2024-02-29 12:00:00', '2024-02-29 12:00:00.120000', '00:00:00', '-00:00:00.500000'),"+
			" (4, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000', '0000-00-00 00:00:00.000000',"+
			"  '0000-00-00 00:00:00', '0000-00-00 00:00:00.000000', '-00:00:01', '23:59:59.999990'),"+
			" (5, '0001-01-01', '0001-01-01 00:00:01', '0999-12-31 23:59:59.001', '2000-01-01 00:00:00.100000',"+
			"  '2001-09-09 01:46:40', '2001-09-09 01:46:40.000500', '24:00:00', '-24:00:00.000001'),"+
			" (6, '2020-00-15', '2020-05-00 10:00:00', '0000-00-00 10:00:00.500', '0000-01-01 00:00:00.000000',"+
			"  NULL, NULL, '100:00:00', '-100:00:00.010000'),"+
			" (7, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
	)
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "tv"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	server, err := root.Execute("SELECT " + selectList(tbl) + " FROM " + quoteTable(tbl.ID) + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRowReader(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for row := range server.RowNumber() {
		for col := 1; col < len(tbl.Columns); col++ {
			name := tbl.Columns[col].Name
			text, err := server.GetString(row, col)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := r.codecs[col].value(nil)
			if server.Values[row][col].Type != gomysql.FieldValueTypeNull {
				want, wantErr = r.codecs[col].value(text)
			}
			got, gotErr := readValue(t, src, tbl, row+1, col)
			if (gotErr != nil) != (wantErr != nil) || got != want {
				t.Errorf("row %d column %s (server text %q): read raw %+v (err %v), want %+v (err %v)", row+1, name, text, got, gotErr, want, wantErr)
			}
			checked++
		}
	}
	if checked != 7*8 {
		t.Fatalf("checked %d values, want %d", checked, 7*8)
	}
}

// readValue reads one value of a row through the chunk path, alone with
// the key (a value the codec refuses fails the read of its row).
func readValue(t *testing.T, src *Source, tbl *change.Table, id, col int) (change.Value, error) {
	t.Helper()
	r, err := newRowReader(tbl)
	if err != nil {
		t.Fatal(err)
	}
	if r.picked, err = pickColumns(tbl, []string{tbl.Columns[col].Name}); err != nil {
		t.Fatal(err)
	}
	var rows []change.Row
	err = src.with(context.Background(), func(c *client.Conn) (err error) {
		rows, _, err = r.selectRows(c, "SELECT "+pickedList(tbl, r.picked)+" FROM "+quoteTable(tbl.ID)+" WHERE id = ?", id)
		return err
	})
	if err != nil {
		return change.Value{}, err
	}
	if len(rows) != 1 {
		t.Fatalf("row %d: %d rows", id, len(rows))
	}
	return rows[0][col], nil
}

// FuzzAppendTemporal checks the raw temporal printer against go-mysql's
// printer followed by the codec (what a chunk read did before reading
// temporal values raw), for any bytes, wire type and column kind.
func FuzzAppendTemporal(f *testing.F) {
	le16 := func(n uint16) []byte { return binary.LittleEndian.AppendUint16(nil, n) }
	le32 := func(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, raw := range [][]byte{
		{},
		cat(le16(2024), []byte{2, 29}),
		cat(le16(9999), []byte{12, 31, 23, 59, 59}),
		cat(le16(1000), []byte{1, 1, 0, 0, 0}, le32(0)),
		cat(le16(2038), []byte{1, 19, 3, 14, 7}, le32(999999)),
		cat(le16(2000), []byte{1, 1, 0, 0, 0}, le32(100000)),
		cat(le16(0), []byte{0, 0, 10, 0, 0}, le32(500000)),
		cat(le16(2020), []byte{0, 15}),
		cat(le16(10000), []byte{1, 1}),
		cat([]byte{1}, le32(34), []byte{22, 59, 59}),
		cat([]byte{0}, le32(34), []byte{22, 59, 59}, le32(999999)),
		cat([]byte{1}, le32(0), []byte{0, 0, 0}, le32(500000)),
		cat([]byte{0}, le32(300), []byte{0, 0, 0}),
	} {
		for wire := range uint8(5) {
			for kd := range uint8(5) {
				f.Add(wire, kd, raw)
			}
		}
	}
	wires := []uint8{gomysql.MYSQL_TYPE_DATE, gomysql.MYSQL_TYPE_NEWDATE, gomysql.MYSQL_TYPE_DATETIME,
		gomysql.MYSQL_TYPE_TIMESTAMP, gomysql.MYSQL_TYPE_TIME}
	kinds := []kind{kindDate, kindDatetime, kindTimestamp, kindTime, kindText}
	f.Fuzz(func(t *testing.T, w, kd uint8, raw []byte) {
		wire := wires[int(w)%len(wires)]
		k := codec{kind: kinds[int(kd)%len(kinds)]}
		got, gotErr := k.appendTemporal([]byte("x"), wire, raw)
		want, wantErr := k.appendTemporalSlow([]byte("x"), wire, raw)
		if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && !bytes.Equal(got, want)) {
			t.Fatalf("wire %d kind %d raw %x: %q (err %v), want %q (err %v)", wire, k.kind, raw, got, gotErr, want, wantErr)
		}
	})
}
