package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/files"
	"github.com/tidemark/tidemark/internal/sink/kafka"
	"github.com/tidemark/tidemark/internal/sink/nats"
)

// eventDest is a destination of TestEventDestinations.
type eventDest struct {
	name string // the case's name
	dest string // the env's destination type
	keys string // extra destination keys
	// seed puts staleItems in the destination before the stream starts,
	// as events of an earlier batch that leave its checkpoint empty.
	seed func(e *env, enc *event.Encoder, t *change.Table)
	// read replays a table's events into the reference consumer, each
	// event seen by w first.
	read func(e *env, t *change.Table, w event.Watch) (*event.Replica, error)
	// check, when set, asserts what this destination alone promises once
	// a backfill of chunks chunks is done.
	check func(e *env, t *change.Table, chunks int64)
}

var eventDests = []eventDest{
	filesDest(files.FormatJSONL),
	filesDest(files.FormatParquet),
	{name: "nats", dest: "nats", seed: seedNats,
		read: func(e *env, t *change.Table, w event.Watch) (*event.Replica, error) {
			return nats.ReadTable(e.ctx, e.cfg.Destination, e.cfg.Name, t, w)
		}},
	// kfake in a child process, topics of 3 partitions: the chunk marks
	// must reach every partition, whose replicas are merged.
	{name: "kafka", dest: "kafka", seed: seedKafka,
		read: func(e *env, t *change.Table, w event.Watch) (*event.Replica, error) {
			return kafka.ReadTable(e.ctx, e.cfg.Destination, e.cfg.Name, t, w)
		}},
}

// filesDest is a files destination writing files of a format. It is
// seeded with a JSONL file in either format: the reader takes each
// file's format from its extension.
func filesDest(format string) eventDest {
	return eventDest{name: "files_" + format, dest: "files", keys: "format: " + format, seed: seedFiles,
		read: func(e *env, t *change.Table, w event.Watch) (*event.Replica, error) {
			return files.ReadTable(e.cfg.Destination.Path, e.cfg.Name, t, w)
		},
		check: func(e *env, t *change.Table, chunks int64) {
			checkManifest(e, t, chunks)
			written, _ := filepath.Glob(filepath.Join(filesTableDir(e, t), "*", "*", "*", "*", "*."+format))
			if len(written) < 2 { // the seeded file is JSONL
				e.t.Errorf("%d .%s files, want the stream's files in its format", len(written), format)
			}
		}}
}

// filesTableDir is where a files destination keeps a table of the
// env's stream (names of letters, digits and '_' need no escaping).
func filesTableDir(e *env, t *change.Table) string {
	return filepath.Join(e.cfg.Destination.Path, e.cfg.Name, t.ID.Schema+"."+t.ID.Name)
}

// seedFiles writes staleItems as a file of an earlier batch.
func seedFiles(e *env, enc *event.Encoder, t *change.Table) {
	e.t.Helper()
	var lines []string
	for _, c := range staleItems(t) {
		m, err := enc.Change(c, event.Origin{})
		if err != nil {
			e.t.Fatal(err)
		}
		lines = append(lines, string(m[0].Value))
	}
	d := filepath.Join(filesTableDir(e, t), "2000", "01", "01", "00")
	if err := os.MkdirAll(d, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "000000000000_0000000000000000-0000000000000000_001.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// checkManifest checks that the table's manifest has a line per chunk.
func checkManifest(e *env, t *change.Table, chunks int64) {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(filesTableDir(e, t), "_backfills.jsonl"))
	if err != nil {
		e.t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != int(chunks) {
		e.t.Errorf("the manifest has %d chunk lines, the backfill wrote %d chunks", n, chunks)
	}
}

// seedNats creates the stream's JetStream stream (as an operator would
// before the first start) holding staleItems on the table's subject.
func seedNats(e *env, enc *event.Encoder, t *change.Table) {
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
	for _, c := range staleItems(t) {
		m, err := enc.Change(c, event.Origin{})
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := js.Publish(e.ctx, fmt.Sprintf("%s.%s.%s", prefix, t.ID.Schema, t.ID.Name), m[0].Value); err != nil {
			e.t.Fatal(err)
		}
	}
}

// seedKafka writes staleItems to the table's topic in a batch of no
// position, which leaves the stream's checkpoint empty.
func seedKafka(e *env, enc *event.Encoder, t *change.Table) {
	e.t.Helper()
	s, err := sink.Open(e.ctx, e.cfg.Destination)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close()
	s.(sink.EventWriter).UseEncoder(enc)
	var ops []sink.Op
	for _, c := range staleItems(t) {
		ops = append(ops, sink.Op{Change: c})
	}
	if err := s.Apply(e.ctx, &sink.Batch{Stream: e.cfg.Name, Ops: ops}); err != nil {
		e.t.Fatal(err)
	}
}
