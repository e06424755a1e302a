package nats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/natsserver"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

var server *natsserver.Server

func TestMain(m *testing.M) {
	var err error
	if server, err = natsserver.Start(context.Background(), natsserver.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "start a throwaway nats-server:", err)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

var table = &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0}, Columns: []change.Column{
	{Name: "id", Tag: change.TagInt64}, {Name: "v", Tag: change.TagText},
}}

func encoder() *event.Encoder {
	return &event.Encoder{Connector: "postgresql", SchemaField: true, Tombstones: true, Fields: func(o event.Origin) []event.Field {
		return []event.Field{{Name: "lsn", Value: uint64(o.Position)}}
	}}
}

func dest() config.Destination { return config.Destination{Type: TypeNATS, URL: server.URL()} }

func open(t *testing.T, d config.Destination, window time.Duration) *Sink {
	t.Helper()
	s, err := Open(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.UseEncoder(encoder())
	s.duplicates = window
	return s
}

func row(id int, v string) change.Row { return change.Row{change.Text(fmt.Sprint(id)), change.Text(v)} }

// txns makes one transaction per ten ids, ending at position 1000+id of
// its last: each inserts its ids, and its first id is updated once more
// in it (two events of one key in one transaction).
func txns(from, to int, v string) []sink.Op {
	var ops []sink.Op
	for i := from; i < to; i += 10 {
		txn := &change.Txn{Xid: uint32(i), CommitLSN: change.LSN(1000 + i + 9), EndLSN: change.LSN(1000 + i + 9)}
		for id := i; id < i+10; id++ {
			ops = append(ops, sink.Op{Txn: txn, Change: &change.Change{Kind: change.Insert, Table: table, Row: row(id, v)}})
		}
		ops = append(ops, sink.Op{Txn: txn, Change: &change.Change{Kind: change.Update, Table: table, Row: row(i, v+"!")}})
	}
	return ops
}

// subjectCounts counts the stream's messages per subject.
func subjectCounts(t *testing.T, s *Sink, stream string) map[string]uint64 {
	t.Helper()
	n := namesOf(s.d, stream)
	str, err := s.js.Stream(context.Background(), n.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(context.Background(), jetstream.WithSubjectFilter(n.prefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// waitWindowPassed publishes one message id on a subject of the stream
// until the server no longer takes it for a duplicate: its duplicate
// window has passed since the id was first sent.
func waitWindowPassed(t *testing.T, s *Sink, stream, id string) {
	t.Helper()
	subj := namesOf(s.d, stream).prefix + ".probe"
	deadline := time.Now().Add(time.Minute)
	for first := true; ; first = false {
		ack, err := s.js.PublishMsg(context.Background(), &natsio.Msg{Subject: subj, Data: []byte("probe")}, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		if !first && !ack.Duplicate {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the duplicate window did not pass within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func wantRows(t *testing.T, d config.Destination, stream string, tb *change.Table, want map[string]string) {
	t.Helper()
	r, err := ReadTable(context.Background(), d, stream, tb)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range r.Rows() {
		got[string(row["id"])] = string(row["v"])
	}
	if len(got) != len(want) {
		t.Errorf("the reader holds %d rows, want %d", len(got), len(want))
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("row %s: v %s, want %s", id, got[id], v)
		}
	}
}

// TestNatsExactlyOnceAfterWindow stops a batch of changes, then one of a
// backfill chunk, part-way through (as a crash would: some messages
// acknowledged, no checkpoint), lets the stream's short duplicate window
// pass, and sends them again from a restarted sink, split differently and
// the chunk read again without one of its rows: every event is in the
// stream once, and the reader holds the source's rows.
func TestNatsExactlyOnceAfterWindow(t *testing.T) {
	ctx := context.Background()
	d := dest()
	const stream = "once"
	s := open(t, d, time.Second)
	if err := s.Apply(ctx, &sink.Batch{Stream: stream, Position: 1099, Ops: txns(0, 100, "a")}); err != nil {
		t.Fatal(err)
	}
	waitProbe := "start"
	waitWindowPassed(t, s, stream, waitProbe) // sends the probe id once
	crash := errors.New("crash")
	s.afterPublish = func(n int) error {
		if n == 37 {
			return crash
		}
		return nil
	}
	if err := s.Apply(ctx, &sink.Batch{Stream: stream, Position: 1199, Ops: txns(100, 200, "b")}); !errors.Is(err, crash) {
		t.Fatalf("the batch did not stop at the crash point: %v", err)
	}
	waitWindowPassed(t, s, stream, "after changes")

	s = open(t, d, time.Second) // the restart
	c, err := s.Checkpoint(ctx, stream)
	if err != nil || c.Position != 1099 {
		t.Fatalf("checkpoint after the crash: %+v %v, want position 1099", c, err)
	}
	for _, b := range []*sink.Batch{
		{Stream: stream, Position: 1149, Ops: txns(100, 150, "b")},
		{Stream: stream, Position: 1199, Ops: txns(150, 200, "b")},
	} {
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	subj := namesOf(d, stream).subject(table.ID)
	if n := subjectCounts(t, s, stream)[subj]; n != 220 {
		t.Errorf("%d messages on %s, want 220 (200 inserts, 20 updates), each once", n, subj)
	}

	// A backfill chunk of keys (0, 300], stopped after 40 rows.
	var rows []change.Row
	for id := 1; id <= 300; id++ {
		rows = append(rows, row(id, "r"))
	}
	chunk := func(rows []change.Row) *sink.Batch {
		return &sink.Batch{Stream: stream, Position: 1199, Ops: []sink.Op{{Chunk: &sink.Chunk{Table: table,
			Low: change.Key{change.Text("0")}, High: change.Key{change.Text("300")}, Rows: rows, BackfillID: 3}}},
			Cursors: map[change.TableID]sink.Cursor{table.ID: {BackfillID: 3, After: change.Key{change.Text("300")}, Rows: 500 + int64(len(rows))}}}
	}
	s.afterPublish = func(n int) error {
		if n == 40 {
			return crash
		}
		return nil
	}
	if err := s.Apply(ctx, chunk(rows)); !errors.Is(err, crash) {
		t.Fatalf("the chunk did not stop at the crash point: %v", err)
	}
	waitWindowPassed(t, s, stream, "after chunk")
	s = open(t, d, time.Second)
	// Read again, the chunk lacks key 150, deleted meanwhile.
	again := append(append([]change.Row{}, rows[:149]...), rows[150:]...)
	if err := s.Apply(ctx, chunk(again)); err != nil {
		t.Fatal(err)
	}
	if n := subjectCounts(t, s, stream)[subj]; n != 220+299+1 {
		t.Errorf("%d messages on %s after the chunk, want %d: 299 rows and a mark, each once", n, subj, 220+299+1)
	}
	want := map[string]string{}
	for id := 1; id <= 300; id++ {
		if id != 150 {
			want[fmt.Sprint(id)] = `"r"`
		}
	}
	want["0"] = `"a!"`
	wantRows(t, d, stream, table, want)
	c, err = open(t, d, time.Second).Checkpoint(ctx, stream)
	if err != nil || c.Position != 1199 || c.Cursors[table.ID].Rows != 799 || c.Cursors[table.ID].After.Encode() != (change.Key{change.Text("300")}).Encode() {
		t.Errorf("checkpoint %+v %v", c, err)
	}
}

// TestNatsDuplicateWindowDropsReplay: a batch acknowledged but not
// checkpointed, sent again within the window without the sink's own
// record of the stream's last messages, is dropped by the server by its
// message ids.
func TestNatsDuplicateWindowDropsReplay(t *testing.T) {
	ctx := context.Background()
	d := dest()
	const stream = "window"
	s := open(t, d, 0)
	crash := errors.New("crash")
	s.beforeCheckpoint = func() error { return crash }
	if err := s.Apply(ctx, &sink.Batch{Stream: stream, Position: 1049, Ops: txns(0, 50, "a")}); !errors.Is(err, crash) {
		t.Fatal(err)
	}
	s = open(t, d, 0)
	st, err := s.state(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if !st.tail.sentChange(1049, 11) {
		t.Errorf("the restarted sink did not read the last messages' positions: %+v", st.tail)
	}
	st.tail = nil
	if err := s.Apply(ctx, &sink.Batch{Stream: stream, Position: 1049, Ops: txns(0, 50, "a")}); err != nil {
		t.Fatal(err)
	}
	if n := subjectCounts(t, s, stream)[namesOf(d, stream).subject(table.ID)]; n != 55 {
		t.Errorf("%d messages, want 55: the replay was not dropped", n)
	}
}

// TestNatsMessageTooLarge: an event over max_message_bytes fails the
// batch as a rejection of its table, naming the limit, and nothing of the
// batch is sent;
// a limit over the server's max_payload is refused at open.
func TestNatsMessageTooLarge(t *testing.T) {
	ctx := context.Background()
	d := dest()
	d.MaxMessageBytes = 64 << 10
	const stream = "large"
	s := open(t, d, 0)
	big := strings.Repeat("x", 70<<10)
	err := s.Apply(ctx, &sink.Batch{Stream: stream, Position: 10, Ops: []sink.Op{
		{Change: &change.Change{Kind: change.Insert, Table: table, Row: row(1, "small")}},
		{Change: &change.Change{Kind: change.Insert, Table: table, Row: row(2, big)}},
	}})
	var te *sink.TableError
	if !errors.Is(err, sink.ErrRejected) || !errors.As(err, &te) || te.Table != table.ID ||
		!strings.Contains(err.Error(), "max_message_bytes") || !strings.Contains(err.Error(), `{"id":2}`) {
		t.Fatalf("an event over the limit: %v", err)
	}
	if n := subjectCounts(t, s, stream); len(n) != 0 {
		t.Errorf("messages of the refused batch were sent: %v", n)
	}
	d.MaxMessageBytes = 64 << 20
	if _, err := Open(ctx, d); err == nil || !strings.Contains(err.Error(), "max_payload") {
		t.Errorf("a limit over the server's max_payload: %v", err)
	}
}

// TestNatsCredentials: a server that wants a login takes the user and
// password in the URL, and refuses a connection without them.
func TestNatsCredentials(t *testing.T) {
	ctx := context.Background()
	srv, err := natsserver.Start(ctx, natsserver.Options{User: "tm", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	d := config.Destination{Type: TypeNATS, URL: srv.URL()}
	if _, err := Open(ctx, d); err == nil {
		t.Errorf("connected without the password")
	}
	d.URL = strings.Replace(srv.URL(), "nats://", "nats://tm:s3cret@", 1)
	s := open(t, d, 0)
	if err := s.Apply(ctx, &sink.Batch{Stream: "creds", Position: 1009, Ops: txns(0, 10, "a")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": `"a!"`}
	for id := 1; id < 10; id++ {
		want[fmt.Sprint(id)] = `"a"`
	}
	wantRows(t, d, "creds", table, want)
}

// TestNatsNames: table names become one subject token each, without
// wildcards or collisions.
func TestNatsNames(t *testing.T) {
	n := names{prefix: "p"}
	seen := map[string]change.TableID{}
	for _, id := range []change.TableID{{Schema: "a.b", Name: "c"}, {Schema: "a", Name: "b.c"}, {Schema: "*", Name: ">"},
		{Schema: "a b", Name: "c"}, {Schema: "x", Name: "%2E"}, {Schema: "x", Name: "."}, {Schema: "é", Name: "t"}} {
		subj := n.subject(id)
		if toks := splitSubject(subj); len(toks) != 3 || strings.ContainsAny(subj, "*> ") {
			t.Errorf("%v: subject %q", id, subj)
		}
		if other, dup := seen[subj]; dup {
			t.Errorf("%v and %v share %s", id, other, subj)
		}
		seen[subj] = id
	}
	if !covers("p.>", "p.x.y") || covers("p.>", "q.x.y") || !covers("p.*.y", "p.x.y") || covers("p.x", "p.x.y") {
		t.Errorf("covers")
	}
}

// TestNatsDoctor: doctor passes against the server and reads the
// position the stream committed; it fails, saying so, where nothing
// listens.
func TestNatsDoctor(t *testing.T) {
	ctx := context.Background()
	d := dest()
	s := open(t, d, 0)
	if err := s.Apply(ctx, &sink.Batch{Stream: "doc", Position: 1009, Ops: txns(0, 10, "a")}); err != nil {
		t.Fatal(err)
	}
	in := sink.DoctorInput{Stream: "doc", Destination: d, Key: "streams[0].destination",
		Position: func(pos change.LSN, _ string) string { return fmt.Sprintf("at %d", pos) }}
	r := doctor(ctx, in)
	if !r.Known || r.Position != 1009 || len(r.Checks) != 1 || !strings.Contains(r.Checks[0].Detail, "tidemark_doc") {
		t.Errorf("doctor: %+v", r)
	}
	in.Destination.URL = "nats://127.0.0.1:1"
	if r := doctor(ctx, in); r.Known || len(r.Checks) != 1 || !strings.Contains(r.Checks[0].Fix, "streams[0].destination.url") {
		t.Errorf("doctor without a server: %+v", r)
	}
}

// TestNatsReadRange: a NATS destination reads back what it published by
// replaying its subject, each read adding only the messages after the
// last stream sequence read (sinktest.ReplayReads; the wipe purges the
// subject).
func TestNatsReadRange(t *testing.T) {
	ctx := context.Background()
	s := open(t, dest(), 0)
	const stream = "readrange"
	if _, err := s.Checkpoint(ctx, stream); err != nil {
		t.Fatal(err)
	}
	pos := change.LSN(1000)
	sinktest.ReplayReads(t, s, table, func(ops []sink.Op) {
		pos += 1000
		if err := s.Apply(ctx, &sink.Batch{Stream: stream, Position: pos, Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}, func() {
		n := namesOf(s.d, stream)
		str, err := s.js.Stream(ctx, n.stream)
		if err == nil {
			err = str.Purge(ctx, jetstream.WithPurgeSubject(n.subject(table.ID)))
		}
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestNatsFence: a new owner fences the stream; the old one's next
// batches are refused (sink.ErrFenced), before and after it reads the
// stream again; a takeover in the middle of a batch in flight lets none of
// the batch's messages after the fence message in; an older epoch cannot
// fence; a JetStream stream shared with other subjects cannot be fenced.
func TestNatsFence(t *testing.T) {
	ctx := context.Background()
	d := dest()
	const stream = "fence"
	subj := namesOf(d, stream).subject(table.ID)
	old := open(t, d, 0)
	if err := old.Fence(ctx, stream, 1); err != nil {
		t.Fatal(err)
	}
	if err := old.Apply(ctx, &sink.Batch{Stream: stream, Position: 1099, Ops: txns(0, 100, "one")}); err != nil {
		t.Fatal(err)
	}
	next := open(t, d, 0)
	if err := next.Fence(ctx, stream, 2); err != nil {
		t.Fatal(err)
	}
	if c, err := next.Checkpoint(ctx, stream); err != nil || c.Position != 1099 {
		t.Fatalf("the new owner's checkpoint: %+v %v, want position 1099", c, err)
	}
	for i := range 2 {
		err := old.Apply(ctx, &sink.Batch{Stream: stream, Position: 1199, Ops: txns(100, 200, "stale")})
		if !errors.Is(err, sink.ErrFenced) {
			t.Fatalf("the old owner's batch %d after the takeover: %v, want ErrFenced", i+1, err)
		}
	}
	if err := next.Apply(ctx, &sink.Batch{Stream: stream, Position: 1149, Ops: txns(100, 150, "new")}); err != nil {
		t.Fatalf("the new owner, after the old one tried again: %v", err)
	}
	if n := subjectCounts(t, next, stream)[subj]; n != 165 {
		t.Errorf("%d messages on %s, want 165: the first owner's 110 and the new owner's 55", n, subj)
	}

	// A third owner takes over while next has a batch in flight.
	third := open(t, d, 0)
	next.afterPublish = func(n int) error {
		if n == 30 {
			return third.Fence(ctx, stream, 3)
		}
		return nil
	}
	err := next.Apply(ctx, &sink.Batch{Stream: stream, Position: 1199, Ops: txns(150, 200, "late")})
	if !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("a batch in flight at a takeover: %v, want ErrFenced", err)
	}
	fenceSeq, late := uint64(0), 0
	str, err := next.js.Stream(ctx, namesOf(d, stream).stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := str.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Header.Get(hdrEpoch) == "3":
			fenceSeq = seq
		case fenceSeq != 0 && strings.Contains(string(m.Data), "late"):
			late++
		}
	}
	if fenceSeq == 0 || late != 0 {
		t.Errorf("fence message at %d; %d messages of the batch in flight after it, want none", fenceSeq, late)
	}
	if err := third.Apply(ctx, &sink.Batch{Stream: stream, Position: 1199, Ops: txns(150, 200, "third")}); err != nil {
		t.Fatalf("the third owner: %v", err)
	}
	if c, err := open(t, d, 0).Checkpoint(ctx, stream); err != nil || c.Position != 1199 {
		t.Errorf("checkpoint after the third owner's batch: %+v %v", c, err)
	}
	if err := next.Fence(ctx, stream, 2); !errors.Is(err, sink.ErrFenced) {
		t.Errorf("fencing at an older epoch: %v, want ErrFenced", err)
	}
	if err := next.Fence(ctx, stream, 4); err != nil {
		t.Errorf("fenced again (a later term on the same node): %v", err)
	}
	if n, err := VerifyFences(ctx, d, stream); err != nil || n != 4 {
		t.Errorf("VerifyFences: %d fences, %v; want 4 and every message of its term", n, err)
	}
	// A message of another term after the last fence is found out.
	stale := &natsio.Msg{Subject: subj, Header: natsio.Header{hdrPosition: {"1199"}, hdrIndex: {"1"}}, Data: []byte("{}")}
	stale.Header.Set(natsio.MsgIdHdr, (&streamState{fenced: true, epoch: 3}).msgID(subj, "change", nil, 1199, 1))
	if _, err := next.js.PublishMsg(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyFences(ctx, d, stream); err == nil || !strings.Contains(err.Error(), "a former owner's") {
		t.Errorf("VerifyFences with a message of epoch 3 after the fence of epoch 4: %v", err)
	}

	shared := d
	shared.NATSStream = "shared"
	if _, err := next.js.CreateStream(ctx, jetstream.StreamConfig{Name: "shared", Subjects: []string{"tidemark.fence2.>", "other.>"}}); err != nil {
		t.Fatal(err)
	}
	err = open(t, shared, 0).Fence(ctx, "fence2", 1)
	if !errors.Is(err, sink.ErrCannotFence) || !strings.Contains(err.Error(), "other.>") || !strings.Contains(err.Error(), "streams[].node") {
		t.Errorf("fencing a JetStream stream shared with other subjects: %v", err)
	}
}
