package mysql

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
)

// TestStream makes inserts, updates (one moving a key) and deletes on the
// throwaway server and expects them as transactions in commit order, with
// values equal to what ReadChunk reads for the same rows, every type
// included, and progress on a heartbeat.
func TestStream(t *testing.T) {
	src, root := testDB(t, typesTable, "CREATE TABLE s (id int PRIMARY KEY, v varchar(10))", "CREATE TABLE other (id int PRIMARY KEY)")
	src.cfg.Heartbeat = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tables := map[change.TableID]*change.Table{}
	for _, name := range []string{"types", "s"} {
		tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: name}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tables[tbl.ID] = tbl
	}
	start, err := src.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan change.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- src.Stream(ctx, start, func(id change.TableID) *change.Table { return tables[id] }, out)
	}()

	exec(t, root, typesRows...)
	exec(t, root, "INSERT INTO other VALUES (1)",
		"BEGIN", "INSERT INTO s VALUES (1, 'a')", "UPDATE s SET v = 'b' WHERE id = 1", "UPDATE s SET id = 2 WHERE id = 1", "DELETE FROM s WHERE id = 2", "COMMIT",
		"UPDATE types SET id = id + 10")
	txns := receiveTxns(t, out, done, 5)
	types := tables[change.TableID{Schema: src.Database(), Name: "types"}]
	chunk, err := src.ReadChunk(ctx, types, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, txn := range txns {
		if i > 0 && txn.CommitLSN <= txns[i-1].CommitLSN {
			t.Errorf("txn %d commits at %v, not after %v", i, txn.CommitLSN, txns[i-1].CommitLSN)
		}
		if txn.CommitLSN > chunk.Position || txn.EndLSN != txn.CommitLSN {
			t.Errorf("txn %d commit %v end %v; a later chunk's position is %v", i, txn.CommitLSN, txn.EndLSN, chunk.Position)
		}
	}
	// Inserted rows, then their key moves: each equals ReadChunk's row but for the id.
	for i := range 3 {
		ins := txns[i].Changes
		if len(ins) != 1 || ins[0].Kind != change.Insert {
			t.Fatalf("txn %d: %+v, want one insert", i, ins)
		}
		upd := txns[4].Changes[i]
		if upd.Kind != change.Update || upd.OldKey[0].Text != ins[0].Row[0].Text {
			t.Errorf("update %d: %v old key %v", i, upd.Kind, upd.OldKey)
		}
		read := chunk.Rows[i]
		if !slices.Equal(upd.Row, read) {
			t.Errorf("row %d from the binlog differs from ReadChunk's:\n%s", i, rowDiff(types, upd.Row, read))
		}
		if !slices.Equal(ins[0].Row[1:], read[1:]) {
			t.Errorf("inserted row %d from the binlog differs from ReadChunk's:\n%s", i, rowDiff(types, ins[0].Row, read))
		}
	}
	got := describeChanges(txns[3].Changes)
	want := []string{"insert [1 a] <nil>", "update [1 b] <nil>", "update [2 b] [1]", "delete [] [2]"}
	if !slices.Equal(got, want) {
		t.Errorf("transaction on s: %q, want %q", got, want)
	}
	if c := src.LastCommit(); c.Position != txns[4].CommitLSN || !regexp.MustCompile(`^0-1-\d+$`).MatchString(c.GTID) {
		t.Errorf("LastCommit = %+v, want the last transaction's position and a MariaDB GTID", c)
	}
	waitProgress(t, out, txns[4].CommitLSN)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Stream returned %v after cancel, want context.Canceled", err)
	}
}

func receiveTxns(t *testing.T, out <-chan change.Event, done <-chan error, n int) []*change.Txn {
	t.Helper()
	var txns []*change.Txn
	timeout := time.After(60 * time.Second)
	for len(txns) < n {
		select {
		case ev := <-out:
			if ev.Txn != nil {
				txns = append(txns, ev.Txn)
			}
		case err := <-done:
			t.Fatalf("Stream ended: %v", err)
		case <-timeout:
			t.Fatalf("received %d of %d transactions", len(txns), n)
		}
	}
	return txns
}

// waitProgress waits for a progress event at or past pos (an idle server's
// heartbeat, or a transaction without streamed changes).
func waitProgress(t *testing.T, out <-chan change.Event, pos change.LSN) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-out:
			if ev.Txn != nil {
				t.Fatalf("unexpected transaction %+v", ev.Txn)
			}
			if ev.Progress >= pos {
				return
			}
		case <-timeout:
			t.Fatalf("no progress at or past %v", pos)
		}
	}
}

func describeChanges(cs []change.Change) []string {
	var s []string
	for _, c := range cs {
		var row []string
		for _, v := range c.Row {
			row = append(row, v.String())
		}
		old := "<nil>"
		if c.OldKey != nil {
			old = "[" + c.OldKey[0].String() + "]"
		}
		s = append(s, c.Kind.String()+" ["+joinSpace(row)+"] "+old)
	}
	return s
}

func joinSpace(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func rowDiff(t *change.Table, a, b change.Row) string {
	s := ""
	for i := range a {
		if i < len(b) && a[i] != b[i] {
			s += t.Columns[i].Name + ": " + clip(a[i].String()) + " != " + clip(b[i].String()) + "\n"
		}
	}
	return s
}

// TestStreamFromChunkPosition reads a chunk while a writer inserts, then
// streams from the chunk's position: every row is in exactly one of the
// chunk and the stream, the merge's premise.
func TestStreamFromChunkPosition(t *testing.T) {
	src, _ := testDB(t, "CREATE TABLE c (id int PRIMARY KEY)")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer := rootConn(t, src.Database())
	inserted := make(chan int)
	stop := make(chan struct{})
	go func() {
		i := 0
		defer func() { inserted <- i }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := writer.Execute("INSERT INTO c VALUES (?)", i+1); err != nil {
				t.Error(err)
				return
			}
			i++
		}
	}()
	var chunk Chunk
	for len(chunk.Rows) < 50 {
		if chunk, err = src.ReadChunk(ctx, tbl, ReadOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := make(chan change.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- src.Stream(ctx, chunk.Position, func(id change.TableID) *change.Table {
			if id == tbl.ID {
				return tbl
			}
			return nil
		}, out)
	}()
	seen := map[string]int{}
	for _, r := range chunk.Rows {
		seen[r[0].Text]++
	}
	// Let the writer run on past the chunk, then stop it.
	for n := 0; n < 100; {
		select {
		case ev := <-out:
			if ev.Txn != nil {
				for _, c := range ev.Txn.Changes {
					seen[c.Row[0].Text]++
				}
				if chunk.SeesCommit(ev.Txn.CommitLSN) {
					t.Errorf("streamed transaction at %v is one the chunk at %v sees", ev.Txn.CommitLSN, chunk.Position)
				}
				n++
			}
		case err := <-done:
			t.Fatalf("Stream ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d transactions streamed in 30 s", n)
		}
	}
	close(stop)
	total := <-inserted
	for len(seen) < total {
		select {
		case ev := <-out:
			if ev.Txn != nil {
				for _, c := range ev.Txn.Changes {
					seen[c.Row[0].Text]++
				}
			}
		case err := <-done:
			t.Fatalf("Stream ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d rows seen", len(seen), total)
		}
	}
	for i := 1; i <= total; i++ {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("row %d seen %d times across the chunk (%d rows) and the stream", i, n, len(chunk.Rows))
		}
	}
}

// TestStreamPurgedPosition streams from a position whose binlog file was
// purged and expects ErrPositionPurged with the reset to run.
func TestStreamPurgedPosition(t *testing.T) {
	src, root := testDB(t)
	ctx := context.Background()
	old, err := src.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	purgeUpTo(t, root, FileName("mysql-bin", old))
	if oldest, err := src.OldestPosition(ctx); err != nil || oldest <= old {
		t.Errorf("oldest position %v (%v) after purging %v", oldest, err, old)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = src.Stream(ctx, old, func(change.TableID) *change.Table { return nil }, make(chan change.Event, 100))
	if !errors.Is(err, ErrPositionPurged) || !strings.Contains(err.Error(), "tidemark stream reset") {
		t.Fatalf("Stream from a purged position: %v, want ErrPositionPurged naming the reset", err)
	}
}

// purgeUpTo rotates the binlog and purges every file up to and including
// file. MariaDB keeps a file until InnoDB has made its commits durable (its
// binlog checkpoint), so the purge is repeated until the file is gone.
func purgeUpTo(t *testing.T, root *client.Conn, file string) {
	t.Helper()
	exec(t, root, "FLUSH BINARY LOGS")
	current, _, err := masterStatus(root)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		exec(t, root, "FLUSH ENGINE LOGS", "PURGE BINARY LOGS TO '"+current+"'")
		r, err := root.Execute("SHOW BINARY LOGS")
		if err != nil {
			t.Fatal(err)
		}
		first, _ := r.GetString(0, 0)
		if first > file {
			return
		}
		time.Sleep(100 * time.Millisecond) // the server's checkpoint has no signal to wait on
	}
	t.Fatalf("%s is still on the server after purging to %s", file, current)
}

// TestStreamGeneratedAndZeroDates: generated columns, virtual and stored,
// and zero dates arrive through the binlog as ReadChunk reads them.
func TestStreamGeneratedAndZeroDates(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE g (id int PRIMARY KEY, a int, v int AS (a * 2) VIRTUAL, st int AS (a + 1) PERSISTENT, d date, dt datetime(2), ts timestamp(3) NULL)")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "g"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tbl.Columns {
		if c.Generated != "" {
			t.Errorf("column %s marked as left out of the log: %q", c.Name, c.Generated)
		}
	}
	out, done := streamFromNow(ctx, t, src, tbl)
	exec(t, root, "SET SESSION sql_mode = ''",
		"INSERT INTO g (id, a, d, dt, ts) VALUES (1, 5, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')")
	txn := receiveTxns(t, out, done, 1)[0]
	want := "[1 5 10 6 -infinity -infinity -infinity]"
	if got := fmt.Sprint(txn.Changes[0].Row); got != want {
		t.Errorf("streamed row %s, want %s", got, want)
	}
	if got := fmt.Sprint(readAll(t, src, tbl)[0]); got != want {
		t.Errorf("read row %s, want %s", got, want)
	}
}

// TestStreamAfterColumnAdded: a column added in front of the others
// mid-stream moves every column in the binlog rows; the stream maps them by
// name again and keeps delivering the described columns (and, since it
// follows schema changes, the added one after them: see
// TestStreamShapeFollowsDDL).
func TestStreamAfterColumnAdded(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE s (id int PRIMARY KEY, v varchar(10))")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, done := streamFromNow(ctx, t, src, tbl)
	exec(t, root, "INSERT INTO s VALUES (1, 'a')", "ALTER TABLE s ADD COLUMN x int FIRST", "INSERT INTO s VALUES (7, 2, 'b')")
	txns := receiveTxns(t, out, done, 2)
	got := append(describeChanges(inShape(tbl, txns[0].Changes)), describeChanges(inShape(tbl, txns[1].Changes))...)
	if want := []string{"insert [1 a] <nil>", "insert [2 b] <nil>"}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
}

// streamFromNow streams one table from the binlog's current end until ctx
// ends; done receives Stream's error.
func streamFromNow(ctx context.Context, t *testing.T, src *Source, tbl *change.Table) (<-chan change.Event, <-chan error) {
	t.Helper()
	start, err := src.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan change.Event, 10)
	done := make(chan error, 1)
	go func() { done <- src.Stream(ctx, start, func(change.TableID) *change.Table { return tbl }, out) }()
	return out, done
}

// TestStreamTakenOverBySameServerID: a cluster's new owner of a stream
// reads the binlog under the stream's server id, and the server ends the
// former owner's binlog connection at once (a server keeps one replica
// per id), rather than letting it read on until it times out: the former
// reader fails well before its read timeout, and the new one reads on.
func TestStreamTakenOverBySameServerID(t *testing.T) {
	old, root := testDB(t, "CREATE TABLE s (id int PRIMARY KEY)")
	old.cfg.Heartbeat = 10 * time.Second // read timeout 30s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := old.Describe(ctx, change.TableID{Schema: old.Database(), Name: "s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(change.TableID) *change.Table { return s }
	start, err := old.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldDone := make(chan change.Event, 100), make(chan error, 1)
	go func() { oldDone <- old.Stream(ctx, start, lookup, oldOut) }()
	exec(t, root, "INSERT INTO s VALUES (1)")
	receiveTxns(t, oldOut, oldDone, 1)

	next, err := Open(ctx, old.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	nextOut, nextDone := make(chan change.Event, 100), make(chan error, 1)
	taken := time.Now()
	go func() { nextDone <- next.Stream(ctx, start, lookup, nextOut) }()
	select {
	case err := <-oldDone:
		t.Logf("the former reader ended %s after the takeover: %v", time.Since(taken).Round(time.Millisecond), err)
		if err == nil {
			t.Error("the former reader ended without an error")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the former reader still reads 15s after another registered under its server id")
	}
	exec(t, root, "INSERT INTO s VALUES (2)")
	txns := receiveTxns(t, nextOut, nextDone, 2)
	if got := describeChanges(txns[1].Changes); !slices.Equal(got, []string{"insert [2] <nil>"}) {
		t.Errorf("the new reader's second transaction: %q", got)
	}
}
