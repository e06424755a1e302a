package stream

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/kafka"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// TestKafkaBackfillWhileWriting is TestFilesBackfillWhileWriting against
// a Kafka destination (kfake in a child process, topics of 3
// partitions): the table's topic already holds stale and extra rows, a
// backfill runs while a writer inserts, updates, deletes and moves keys,
// and the reference consumer reading the topic read_committed, a replica
// per partition, ends with exactly the source's rows: the chunk marks
// reach every partition.
func TestKafkaBackfillWhileWriting(t *testing.T) {
	e := newEnv(t, envOptions{dest: "kafka",
		setup: fmt.Sprintf(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text);
			INSERT INTO items SELECT g, g, 'note ' || g FROM generate_series(1, %d) g;`, filesRows),
		yaml: "backfill: {mode: manual, chunk_size: 500, verify: false}"})
	typ, err := source.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	enc := typ.Encoder(e.cfg.Name, "", true, "test")
	e.seedKafka(enc)
	e.start()
	stop := e.itemsWriter()
	if _, err := e.s.Initiate(e.ctx, []change.TableID{itemsTable.ID}, store.StartedByCLI, nil); err != nil {
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
	e.waitFor("the topic replays to the source's rows", func() bool {
		r, err := kafka.ReadTable(e.ctx, e.cfg.Destination, e.cfg.Name, itemsTable)
		if err != nil {
			t.Fatal(err)
		}
		diff = diffEvents(e.sourceEvents(enc), r.Rows())
		return diff == ""
	}, func() string { return diff })
	t.Logf("%d writes during the backfill", writes)
}

// seedKafka writes staleItems to the items topic in a batch of no
// position, which leaves the stream's checkpoint empty.
func (e *env) seedKafka(enc *event.Encoder) {
	e.t.Helper()
	s, err := sink.Open(e.ctx, e.cfg.Destination)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	s.(sink.EventWriter).UseEncoder(enc)
	var ops []sink.Op
	for _, c := range staleItems() {
		ops = append(ops, sink.Op{Change: c})
	}
	if err := s.Apply(e.ctx, &sink.Batch{Stream: e.cfg.Name, Ops: ops}); err != nil {
		e.t.Fatal(err)
	}
}
