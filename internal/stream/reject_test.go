package stream

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/files"
	"github.com/tidemark/tidemark/internal/sink/kafka"
	"github.com/tidemark/tidemark/internal/sink/nats"
	"github.com/tidemark/tidemark/internal/sink/sqlite"
	"github.com/tidemark/tidemark/internal/store"
)

func rejectTable(name string) *change.Table {
	return &change.Table{ID: change.TableID{Schema: "public", Name: name}, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Tag: change.TagInt32}, {Name: "v", Tag: change.TagText},
	}}
}

// TestNatsOversizeEventFailsItsObject: see testOversizeEvent.
func TestNatsOversizeEventFailsItsObject(t *testing.T) { testOversizeEvent(t, "nats") }

// TestKafkaOversizeEventFailsItsObject: see testOversizeEvent.
func TestKafkaOversizeEventFailsItsObject(t *testing.T) { testOversizeEvent(t, "kafka") }

// testOversizeEvent streams two tables into an event destination with the
// smallest max_message_bytes. A row of table a over the limit fails a's
// object with the size, the limit and what to do, and nothing of a is
// written from that row on; b's rows, also those in the refused row's
// batch and transaction, keep arriving and the stream keeps running. After
// a restart a stays failed while b streams; a backfill of a, once the row
// is gone, brings a back.
func testOversizeEvent(t *testing.T, dest string) {
	e := newEnv(t, envOptions{dest: dest, destKeys: "max_message_bytes: 1024",
		setup: `CREATE TABLE a (id int PRIMARY KEY, v text); CREATE TABLE b (id int PRIMARY KEY, v text);`,
		yaml:  "backfill: {mode: manual, verify: false}"})
	a, b := rejectTable("a"), rejectTable("b")
	read := func(tb *change.Table) ([]string, error) {
		var r *event.Replica
		var err error
		if dest == "kafka" {
			r, err = kafka.ReadTable(e.ctx, e.cfg.Destination, e.cfg.Name, tb)
		} else {
			r, err = nats.ReadTable(e.ctx, e.cfg.Destination, e.cfg.Name, tb)
		}
		if err != nil {
			return nil, err
		}
		var out []string
		for _, row := range r.Rows() {
			out = append(out, string(row["id"]))
		}
		return out, nil
	}
	ids := func(tb *change.Table) []string {
		t.Helper()
		out, err := read(tb)
		if err != nil {
			t.Fatalf("read %s: %v", tb.ID, err)
		}
		return out
	}
	// A Kafka topic is created with its first event: until then it is
	// read again.
	waitRows := func(tb *change.Table, want ...string) {
		t.Helper()
		var got []string
		var err error
		e.waitFor(tb.ID.String()+" holds "+strings.Join(want, ","), func() bool {
			got, err = read(tb)
			return err == nil && slices.Equal(got, want)
		}, func() string { return fmt.Sprintf("%v %v", got, err) })
	}

	e.start()
	e.exec(`INSERT INTO a VALUES (1, 'small'); INSERT INTO b VALUES (1, 'small')`)
	waitRows(a, "1")
	waitRows(b, "1")
	e.exec(`INSERT INTO a VALUES (2, repeat('x', 2000))`)
	e.exec(`INSERT INTO b VALUES (2, 'after'); INSERT INTO a VALUES (3, 'after')`)
	e.exec(`INSERT INTO b VALUES (3, 'after')`)
	e.waitFor("a failed", func() bool { return e.object("a").Status == StatusFailed })
	failed := e.object("a")
	for _, want := range []string{rejectedPrefix, "over the destination's max_message_bytes (1024)", "raise max_message_bytes",
		"tidemark backfill initiate " + e.cfg.Name + " public.a"} {
		if !strings.Contains(failed.Reason, want) {
			t.Errorf("a's reason %q lacks %q", failed.Reason, want)
		}
	}
	waitRows(b, "1", "2", "3")
	if got := ids(a); !slices.Equal(got, []string{"1"}) {
		t.Errorf("a holds %v, want only the row before the refused one", got)
	}
	if st := e.s.State(); st.State != store.StateRunning {
		t.Errorf("stream state %+v, want running", st)
	}
	if o := e.object("b"); o.Status == StatusFailed {
		t.Errorf("b failed: %s", o.Reason)
	}

	// The refusal outlives a restart: a is not streamed, b is.
	e.stop()
	e.start()
	e.exec(`INSERT INTO a VALUES (4, 'later'); INSERT INTO b VALUES (4, 'later')`)
	waitRows(b, "1", "2", "3", "4")
	if o := e.object("a"); o.Status != StatusFailed || o.Reason != failed.Reason {
		t.Errorf("after a restart a is %s (%s), want failed", o.Status, o.Reason)
	}
	if got := ids(a); !slices.Equal(got, []string{"1"}) {
		t.Errorf("after a restart a holds %v, want only 1", got)
	}

	// Fixed on the source, a backfill streams a again.
	e.exec(`DELETE FROM a WHERE id = 2`)
	if _, err := e.s.Initiate(e.ctx, []change.TableID{a.ID}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("a")
	e.exec(`INSERT INTO a VALUES (5, 'streamed again')`)
	waitRows(a, "1", "3", "4", "5")
}

// TestDropTable: a refused table's changes, chunk, cursor and counters
// leave the batch; the other tables' stay, in order, with the position.
func TestDropTable(t *testing.T) {
	a, b := rejectTable("a"), rejectTable("b")
	ins := func(tb *change.Table, id string) sink.Op {
		return sink.Op{Change: &change.Change{Kind: change.Insert, Table: tb, Row: change.Row{change.Text(id), change.Text("v")}}}
	}
	chunk := func(tb *change.Table) sink.Op {
		return sink.Op{Chunk: &sink.Chunk{Table: tb, Rows: []change.Row{{change.Text("9"), change.Text("v")}, {change.Text("10"), change.Text("v")}}}}
	}
	bt := &outBatch{Batch: sink.Batch{Stream: "s", Position: 42,
		Ops:     []sink.Op{ins(a, "1"), ins(b, "1"), chunk(a), ins(a, "2"), ins(b, "2"), chunk(b)},
		Cursors: map[change.TableID]sink.Cursor{a.ID: {BackfillID: 1, Rows: 2}, b.ID: {BackfillID: 2, Rows: 2}}},
		changes: 8, events: 4,
		counters: map[change.TableID]*objectCounts{a.ID: {events: 2}, b.ID: {events: 2}},
		chunks:   []committedChunk{{backfillID: 1, table: a.ID, rows: 2}, {backfillID: 2, table: b.ID, rows: 2}}}
	if !dropTable(bt, a.ID) {
		t.Fatal("dropTable found nothing of a")
	}
	var got []string
	for _, op := range bt.Ops {
		if op.Change != nil {
			got = append(got, op.Change.Table.ID.Name+":"+op.Change.Row[0].Text)
		} else {
			got = append(got, op.Chunk.Table.ID.Name+":chunk")
		}
	}
	if want := []string{"b:1", "b:2", "b:chunk"}; !slices.Equal(got, want) {
		t.Errorf("ops %v, want %v", got, want)
	}
	if _, ok := bt.Cursors[a.ID]; ok || len(bt.Cursors) != 1 {
		t.Errorf("cursors %v, want b's only", bt.Cursors)
	}
	if _, ok := bt.counters[a.ID]; ok || len(bt.counters) != 1 {
		t.Errorf("counters %v, want b's only", bt.counters)
	}
	if len(bt.chunks) != 1 || bt.chunks[0].table != b.ID {
		t.Errorf("committed chunks %+v, want b's only", bt.chunks)
	}
	if bt.changes != 4 || bt.events != 2 || bt.Position != 42 {
		t.Errorf("changes %d, events %d, position %d; want 4, 2, 42", bt.changes, bt.events, bt.Position)
	}
	if dropTable(bt, a.ID) {
		t.Error("a second dropTable of a found something")
	}
}

// TestRejectedHint: a rejection that fails the stream names a destination
// table only where the destination holds tables.
func TestRejectedHint(t *testing.T) {
	if h := rejectedHint((*sqlite.Sink)(nil)); !strings.Contains(h, "destination table") {
		t.Errorf("sqlite hint %q does not name the destination table", h)
	}
	if h := rejectedHint((*files.Sink)(nil)); strings.Contains(h, "table") {
		t.Errorf("files hint %q names a table a files destination does not have", h)
	}
}
