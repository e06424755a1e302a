package stream

import (
	"fmt"
	"testing"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink/nats"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// TestNatsBackfillWhileWriting streams a table into a JetStream stream
// that already holds stale and extra rows on the table's subject (a
// consumer's view that missed changes), backfills it while a writer
// inserts, updates, deletes and moves keys across chunks, and checks that
// the reference consumer replaying the subject ends with exactly the
// source's rows.
func TestNatsBackfillWhileWriting(t *testing.T) {
	e := newEnv(t, envOptions{dest: "nats",
		setup: fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text);
			INSERT INTO items SELECT g, g, 'note ' || g FROM generate_series(1, %d) g;`, filesRows),
		yaml: "backfill: {mode: manual, chunk_size: 500, verify: false}"})
	typ, err := source.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	enc := typ.Encoder(e.cfg.Name, "", true, "test")
	e.seedNats(enc)
	e.start()
	stop := e.itemsWriter()
	id := itemsTable.ID
	if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitForWithin(5*time.Minute, "items completed", func() bool {
		o := e.object("items")
		if o.Status == StatusFailed {
			t.Fatalf("backfill failed: %s", o.Reason)
		}
		return o.Status == StatusCompleted
	})
	writes := stop()
	var diff string
	e.waitFor("the subject replays to the source's rows", func() bool {
		r, err := nats.ReadTable(e.ctx, e.cfg.Destination, e.cfg.Name, itemsTable)
		if err != nil {
			t.Fatal(err)
		}
		diff = diffEvents(e.sourceEvents(enc), r.Rows())
		return diff == ""
	}, func() string { return diff })
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes during the backfill; backfill %+v", writes, recs[0])
	if recs[0].Chunks < filesRows/500 {
		t.Errorf("%d chunks for %d rows with chunk_size 500", recs[0].Chunks, filesRows)
	}
}

// seedNats creates the stream's JetStream stream (as an operator would
// before the first start) holding rows the source does not have (keys -7
// and 9999999) and a stale version of every tenth row.
func (e *env) seedNats(enc *event.Encoder) {
	e.t.Helper()
	nc, err := natsio.Connect(e.cfg.Destination.URL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	prefix := "tidemark." + e.cfg.Name
	if _, err := js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "tidemark_" + e.cfg.Name, Subjects: []string{prefix + ".>"}}); err != nil {
		e.t.Fatal(err)
	}
	add := func(id, v int, note string) {
		m, err := enc.Change(&change.Change{Kind: change.Insert, Table: itemsTable,
			Row: change.Row{change.Text(fmt.Sprint(id)), change.Text(fmt.Sprint(v)), change.Text(note)}}, event.Origin{})
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := js.Publish(e.ctx, prefix+".public.items", m[0].Value); err != nil {
			e.t.Fatal(err)
		}
	}
	add(-7, 0, "extra")
	add(9999999, 0, "extra")
	for id := 10; id <= filesRows; id += 10 {
		add(id, -1, "stale")
	}
}
