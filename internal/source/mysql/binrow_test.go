package mysql

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
)

// TestReadChunkBlocks reads chunks of more rows than a block holds, with
// NULLs, values past a block's bytes and a column subset, and checks every
// value against the one the row was written with.
func TestReadChunkBlocks(t *testing.T) {
	src, _ := testDB(t,
		"CREATE TABLE blk (id int PRIMARY KEY, n bigint, s varchar(20), ts datetime(6), big longtext)",
		"INSERT INTO blk SELECT seq, IF(seq % 7 = 0, NULL, CAST(seq AS SIGNED) * -1000), IF(seq % 5 = 0, NULL, CONCAT('s', seq)),"+
			" TIMESTAMPADD(MICROSECOND, seq * 1000, '2020-01-01 00:00:00'), IF(seq % 300 = 0, REPEAT('x', 700000), NULL)"+
			" FROM seq_1_to_1500")
	ctx := context.Background()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "blk"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := func(id int) []change.Value {
		row := []change.Value{change.Text(fmt.Sprint(id)), change.Null, change.Null, {}, change.Null}
		if id%7 != 0 {
			row[1] = change.Text(fmt.Sprint(id * -1000))
		}
		if id%5 != 0 {
			row[2] = change.Text(fmt.Sprintf("s%d", id))
		}
		row[3] = change.Text(fmt.Sprintf("2020-01-01 00:00:%02d.%03d", id/1000, id%1000))
		row[3].Text = strings.TrimSuffix(strings.TrimRight(row[3].Text, "0"), ".")
		if id%300 == 0 {
			row[4] = change.Text(strings.Repeat("x", 700000))
		}
		return row
	}
	for _, cols := range [][]string{nil, {"s", "big"}} {
		var after change.Key
		id := 0
		for {
			c, err := src.ReadChunk(ctx, tbl, ReadOptions{After: after, Limit: 700, Columns: cols})
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Rows) == 0 {
				break
			}
			for _, r := range c.Rows {
				id++
				w := want(id)
				for i, v := range r {
					if cols != nil && i != 0 && i != 2 && i != 4 {
						w[i] = change.Value{Unchanged: true}
					}
					if v != w[i] {
						t.Fatalf("columns %q, row %d column %s: %+.40v, want %+.40v", cols, id, tbl.Columns[i].Name, v, w[i])
					}
				}
			}
			after = tbl.RowKey(c.Rows[len(c.Rows)-1])
		}
		if id != 1500 {
			t.Errorf("columns %q: %d rows read, want 1500", cols, id)
		}
	}
}

// FuzzAppendField checks the chunk read's direct printing of integers,
// decimals and text against the codec's text of the same value (what a
// chunk read did before, and what the binlog's values go through), for
// values as go-mysql parses them from a binary-protocol row.
func FuzzAppendField(f *testing.F) {
	f.Add(uint8(0), int64(-1), []byte("12.50"))
	f.Add(uint8(1), int64(-128), []byte("héllo  "))
	f.Add(uint8(2), int64(1<<62), []byte("\xff\xfe"))
	f.Add(uint8(3), int64(0), []byte(`{"a": 1}`))
	f.Add(uint8(7), int64(255), []byte("a,b"))
	codecs := []codec{
		{kind: kindInt, bits: 64}, {kind: kindInt, bits: 8, unsigned: true}, {kind: kindInt, bits: 64, unsigned: true},
		{kind: kindDecimal}, {kind: kindText}, {kind: kindChar}, {kind: kindJSON},
		{kind: kindText, charset: charsetLatin1}, {kind: kindChar, charset: charsetLatin1},
		{kind: kindBytes}, {kind: kindBinary, length: 4}, {kind: kindBit, bits: 16},
		{kind: kindEnum, labels: []string{"a", "b"}}, {kind: kindSet, labels: []string{"a", "b"}},
	}
	f.Fuzz(func(t *testing.T, which uint8, n int64, b []byte) {
		k := codecs[int(which)%len(codecs)]
		for _, field := range []*gomysql.Field{
			{Type: gomysql.MYSQL_TYPE_LONGLONG},
			{Type: gomysql.MYSQL_TYPE_LONGLONG, Flag: gomysql.UNSIGNED_FLAG},
			{Type: gomysql.MYSQL_TYPE_VAR_STRING},
		} {
			// A binary-protocol row of one column: header, NULL bitmap, value.
			row := []byte{gomysql.OK_HEADER, 0}
			if field.Type == gomysql.MYSQL_TYPE_LONGLONG {
				row = binary.LittleEndian.AppendUint64(row, uint64(n))
			} else {
				row = append(append(row, gomysql.PutLengthEncodedInt(uint64(len(b)))...), b...)
			}
			vals, err := gomysql.RowData(row).ParseBinary([]*gomysql.Field{field}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, gotErr := k.appendField([]byte("x"), 0, &vals[0])
			want, wantErr := k.text(fieldValue(vals[0]))
			if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && !bytes.Equal(got, []byte("x"+want))) {
				t.Fatalf("codec %+v, field type %d flag %d, value %d %q: %q (err %v), want %q (err %v)",
					k, field.Type, field.Flag, n, b, got, gotErr, "x"+want, wantErr)
			}
		}
	})
}
