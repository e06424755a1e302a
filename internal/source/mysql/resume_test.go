package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/source"
)

// resumed is what a stream delivered: each transaction's inserted ids and
// where it ended, with the resume token after it.
type resumed struct {
	ids    []string
	end    change.LSN
	resume string
}

// streamFrom runs the contract's Stream from a checkpoint (ResumeFrom
// first, as the stream does) and collects n transactions on table tbl.
func streamFrom(t *testing.T, ss *streamSource, tbl *change.Table, pos change.LSN, token string, n int, write func()) []resumed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if pos == 0 { // a first start: from the binlog's end before the writes
		var err error
		if pos, err = ss.src.CurrentPosition(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.ResumeFrom(ctx, pos, token); err != nil {
		t.Fatal(err)
	}
	out := make(chan change.Event, 100)
	done := make(chan error, 1)
	go func() {
		done <- ss.Stream(ctx, pos, func(id change.TableID) *change.Table {
			if id == tbl.ID {
				return tbl
			}
			return nil
		}, out)
	}()
	if write != nil {
		write()
	}
	var got []resumed
	timeout := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case ev := <-out:
			if ev.Txn == nil {
				continue
			}
			r := resumed{end: ev.Txn.EndLSN, resume: ev.Resume}
			for _, c := range ev.Txn.Changes {
				r.ids = append(r.ids, c.Row[0].Text)
			}
			got = append(got, r)
		case err := <-done:
			t.Fatalf("Stream ended after %d transactions: %v", len(got), err)
		case <-timeout:
			t.Fatalf("received %d of %d transactions", len(got), n)
		}
	}
	cancel()
	<-done
	return got
}

func idsOf(rs []resumed) string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, strings.Join(r.ids, "+"))
	}
	return strings.Join(ids, ",")
}

func openStreamSource(t *testing.T, dsn string, serverID uint32) *streamSource {
	t.Helper()
	src, err := Open(context.Background(), Config{DSN: dsn, ServerID: serverID, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return &streamSource{src: src}
}

// TestStreamResumesByGTID: a stream restarted from a checkpoint (position
// and GTID state) gets exactly the transactions after it, on a server
// whose binlog rotated in between; the resume token is the server's own
// GTID state after each transaction.
func TestStreamResumesByGTID(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE t (id int PRIMARY KEY)")
	ss := &streamSource{src: src}
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := streamFrom(t, ss, tbl, 0, "", 2, func() { exec(t, root, "INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)") })
	cp := first[1]
	r, err := root.Execute("SELECT @@gtid_binlog_pos")
	if err != nil {
		t.Fatal(err)
	}
	if pos := getString(r, 0, 0); cp.resume != pos {
		t.Fatalf("resume token after the last transaction %q, server's gtid_binlog_pos %q", cp.resume, pos)
	}
	exec(t, root, "INSERT INTO t VALUES (3)", "FLUSH BINARY LOGS", "INSERT INTO t VALUES (4)")
	again := streamFrom(t, ss, tbl, cp.end, cp.resume, 2, nil)
	if got := idsOf(again); got != "3,4" {
		t.Fatalf("resumed from %s (GTID %s): transactions %s, want 3,4", formatPosition(cp.end), cp.resume, got)
	}
	if again[0].end <= cp.end || epochOf(again[1].end) != 0 {
		t.Errorf("positions after the resume %v, %v; the checkpoint was at %v (same server: same epoch)", again[0].end, again[1].end, cp.end)
	}
}

// TestStreamFailoverByGTID is a real failover: a MariaDB replica (with
// log_slave_updates, its binlog numbered differently) is promoted after
// the primary stops, and the stream resumes on it from the checkpoint it
// took on the primary: every transaction after the checkpoint arrives
// once, none before it, and every position (the chunks' too) orders after
// the checkpoint's.
func TestStreamFailoverByGTID(t *testing.T) {
	ctx := context.Background()
	primary, replica := mysqlserver.ForFailover(t)
	if err := primary.Exec(ctx, "", "CREATE DATABASE app", "CREATE TABLE app.t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	onPrimary := openStreamSource(t, primary.DSN("app"), 501)
	tbl, err := onPrimary.Describe(ctx, change.TableID{Schema: "app", Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := streamFrom(t, onPrimary, tbl, 0, "", 2, func() {
		if err := primary.Exec(ctx, "app", "INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)"); err != nil {
			t.Fatal(err)
		}
	})
	cp := first[1]
	if err := primary.Exec(ctx, "app", "INSERT INTO t VALUES (3)", "INSERT INTO t VALUES (4)"); err != nil {
		t.Fatal(err)
	}
	if err := replica.WaitReplicated(ctx, primary); err != nil {
		t.Fatal(err)
	}
	// The failover: the primary goes away, the replica takes the writes.
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	primary.Stop()
	if err := replica.Exec(ctx, "app", "INSERT INTO t VALUES (5)"); err != nil {
		t.Fatal(err)
	}
	onReplica := openStreamSource(t, replica.DSN("app"), 502)
	if err := onReplica.ResumeFrom(ctx, cp.end, cp.resume); err != nil {
		t.Fatal(err)
	}
	if state, err := onReplica.LogState(ctx); err != nil || state.Invalidated {
		t.Fatalf("log state on the promoted replica: %+v, %v", state, err)
	}
	chunk, err := onReplica.ReadChunk(ctx, tbl, source.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if chunk.Position <= cp.end {
		t.Errorf("a chunk read on the promoted replica is at %s, not after the checkpoint %s", formatPosition(chunk.Position), formatPosition(cp.end))
	}
	after := streamFrom(t, onReplica, tbl, cp.end, cp.resume, 3, nil)
	if got := idsOf(after); got != "3,4,5" {
		t.Fatalf("resumed on the promoted replica from %s (GTID %s): transactions %s, want 3,4,5", formatPosition(cp.end), cp.resume, got)
	}
	for _, a := range after {
		if a.end <= cp.end || epochOf(a.end) != 1 {
			t.Errorf("position %s after the failover: want epoch 1, after the checkpoint %s", formatPosition(a.end), formatPosition(cp.end))
		}
	}
	if !strings.HasPrefix(after[2].resume, "0-2-") {
		t.Errorf("resume token after the replica's own write %q, want domain 0 written by server 2", after[2].resume)
	}
}

// TestStreamPurgedGTID: a checkpoint whose GTID state the server's binlog
// no longer reaches (files purged after more writes) is reported lost by
// LogState, and Stream fails as permanent, naming the reset.
func TestStreamPurgedGTID(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE t (id int PRIMARY KEY)")
	ss := &streamSource{src: src}
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := streamFrom(t, ss, tbl, 0, "", 1, func() { exec(t, root, "INSERT INTO t VALUES (1)") })[0]
	exec(t, root, "INSERT INTO t VALUES (2)")
	purgeUpTo(t, root, FileName("mysql-bin", cp.end))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss = &streamSource{src: src}
	if err := ss.ResumeFrom(ctx, cp.end, cp.resume); err != nil {
		t.Fatal(err)
	}
	ss.Confirm(cp.end)
	state, err := ss.LogState(ctx)
	if err != nil || !state.Invalidated || !strings.Contains(state.InvalidatedReason, cp.resume) {
		t.Fatalf("log state from a purged GTID state %s: %+v, %v; want invalidated", cp.resume, state, err)
	}
	err = ss.Stream(ctx, cp.end, func(change.TableID) *change.Table { return nil }, make(chan change.Event, 100))
	var perm *source.PermanentError
	if !errors.Is(err, ErrPositionPurged) || !errors.As(err, &perm) || !strings.Contains(perm.Hint, "tidemark stream reset") {
		t.Fatalf("Stream from a purged GTID state: %v, want a permanent ErrPositionPurged naming the reset", err)
	}
}

// TestStreamStartingOverStartsWhereEnsureLogRan: a stream starting over
// (no checkpoint) reports itself running after EnsureLog and before its
// Stream reads the binlog; a change made in between is streamed, not
// skipped as being before the binlog's end.
func TestStreamStartingOverStartsWhereEnsureLogRan(t *testing.T) {
	ctx := context.Background()
	src, root := testDB(t, "CREATE TABLE t (id int PRIMARY KEY)")
	ss := &streamSource{src: src}
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.ResumeFrom(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.EnsureLog(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, root, "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan change.Event, 10)
	done := make(chan error, 1)
	go func() { done <- ss.Stream(ctx, 0, func(change.TableID) *change.Table { return tbl }, out) }()
	exec(t, root, "INSERT INTO t VALUES (2)")
	txns := receiveTxns(t, out, done, 2)
	if got := txns[0].Changes[0].Row[0].Text + "," + txns[1].Changes[0].Row[0].Text; got != "1,2" {
		t.Fatalf("streamed %s, want 1,2", got)
	}
}
