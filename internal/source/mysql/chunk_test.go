package mysql

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
)

// TestReadChunkKeyset pages through a composite key with bounds at the
// integer edges, a latin1 text key column and a decimal.
func TestReadChunkKeyset(t *testing.T) {
	src, root := testDB(t,
		"CREATE TABLE k (a bigint unsigned, b varchar(10) CHARACTER SET latin1, d decimal(30,20), v int, PRIMARY KEY (a, b, d))")
	var want []string
	for _, a := range []string{"0", "9007199254740993", "18446744073709551614", "18446744073709551615"} {
		for _, b := range []string{"A", "é", "z"} {
			exec(t, root, fmt.Sprintf("INSERT INTO k VALUES (%s, '%s', 0.00000000000000000001, 1), (%s, '%s', 1, 2)", a, b, a, b))
			want = append(want, a+"/"+b+"/0.00000000000000000001", a+"/"+b+"/1.00000000000000000000")
		}
	}
	ctx := context.Background()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var after change.Key
	for range 100 {
		c, err := src.ReadChunk(ctx, tbl, ReadOptions{After: after, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Rows) == 0 {
			break
		}
		if c.Position == 0 || c.File == "" {
			t.Fatalf("chunk without a position: %+v", c)
		}
		for _, r := range c.Rows {
			got = append(got, r[0].Text+"/"+r[1].Text+"/"+r[2].Text)
		}
		after = tbl.RowKey(c.Rows[len(c.Rows)-1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged rows:\n%q\nwant\n%q", got, want)
	}
	// (After, Upto]: from just after the first row to the second 2^53+1 row.
	first := change.Key{change.Text("0"), change.Text("A"), change.Text("0.00000000000000000001")}
	upto := change.Key{change.Text("9007199254740993"), change.Text("é"), change.Text("1.00000000000000000000")}
	c, err := src.ReadChunk(ctx, tbl, ReadOptions{After: first, Upto: upto})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 9 {
		t.Errorf("(after, upto] holds %d rows, want 9", len(c.Rows))
	}
}

// TestReadChunkSnapshotPosition reads chunks while a writer commits one
// insert after another, and checks each chunk against the binlog: the rows
// read are exactly those whose transactions end in the binlog before the
// chunk's position.
func TestReadChunkSnapshotPosition(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE w (id int PRIMARY KEY)")
	ctx := context.Background()
	file, start, err := masterStatus(root)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "w"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer := rootConn(t, src.Database())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := writer.Execute("INSERT INTO w VALUES (" + strconv.Itoa(i) + ")"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var chunks []Chunk
	for range 40 {
		c, err := src.ReadChunk(ctx, tbl, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	close(stop)
	wg.Wait()
	for _, c := range chunks {
		if c.File != file {
			t.Fatalf("binlog rotated during the test (%s, %s)", file, c.File)
		}
		n := commitsBetween(t, root, file, start, uint32(c.Position))
		if len(c.Rows) != n {
			t.Errorf("chunk at %s holds %d rows; %d inserts committed before that position", FormatPosition("mysql-bin", c.Position), len(c.Rows), n)
			continue
		}
		for i, r := range c.Rows {
			if r[0].Text != strconv.Itoa(i+1) {
				t.Errorf("chunk row %d is id %s", i, r[0].Text)
				break
			}
		}
	}
	if last := chunks[len(chunks)-1]; len(last.Rows) == len(chunks[0].Rows) {
		t.Errorf("the writer committed nothing while chunks were read (%d rows each)", len(last.Rows))
	}
}

// commitsBetween counts the transactions (Xid events) that end in the
// binlog file after from and at or before upto.
func commitsBetween(t *testing.T, c *client.Conn, file string, from, upto uint32) int {
	t.Helper()
	r, err := c.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d", file, from))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range r.RowNumber() {
		typ, _ := r.GetStringByName(i, "Event_type")
		end, _ := r.GetUintByName(i, "End_log_pos")
		if typ == "Xid" && end <= uint64(upto) {
			n++
		}
	}
	return n
}

// TestReadChunkEnumSetKeys pages through enum and set keys, which the
// server sorts by index and bitmask, not by label.
func TestReadChunkEnumSetKeys(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE es (e enum('z','a','m') NOT NULL, s set('y','b') NOT NULL, PRIMARY KEY (e, s))")
	exec(t, root, "INSERT INTO es VALUES ('z', ''), ('z', 'y'), ('z', 'b'), ('z', 'y,b'), ('a', 'b'), ('m', 'y')")
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "es"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var after change.Key
	for range 10 {
		c, err := src.ReadChunk(context.Background(), tbl, ReadOptions{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Rows) == 0 {
			break
		}
		for _, r := range c.Rows {
			got = append(got, r[0].Text+"/"+r[1].Text)
		}
		after = tbl.RowKey(c.Rows[len(c.Rows)-1])
	}
	want := []string{"z/", "z/y", "z/b", "z/y,b", "a/b", "m/y"}
	if !slices.Equal(got, want) {
		t.Errorf("paged %q, want %q", got, want)
	}
}
