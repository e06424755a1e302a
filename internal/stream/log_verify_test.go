package stream

import (
	"context"
	"testing"

	natsio "github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink/kafka"
	"github.com/tidemark/tidemark/internal/source"
)

// TestLogVerify: a backfill into a NATS or Kafka destination ends with a
// verify by replay that matches (a time with zone included, which events
// carry in UTC). An update event forged into the log, as a stray producer
// would write it, makes verify report that key, and a repair's reset
// chunk puts the source's row back.
func TestLogVerify(t *testing.T) {
	t.Parallel()
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "items"}, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Tag: change.TagInt64}, {Name: "note", Tag: change.TagText}, {Name: "tz", Tag: change.TagTimeTZ},
	}}
	for _, dest := range []string{"nats", "kafka"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic, chunk_size: 500}", setup: `
				CREATE TABLE items (id bigint PRIMARY KEY, note text, tz timetz);
				INSERT INTO items SELECT g, 'note ' || g, '04:05:06.25+05:30' FROM generate_series(1, 2000) g;`})
			e.start()
			run := e.waitVerified(e.waitLoaded("items").BackfillID)
			if run.Verify.Status != VerifyMatch || run.Verify.DestRows != 2000 {
				t.Fatalf("the backfill's verify: %+v, want a match over 2000 rows", *run.Verify)
			}
			typ, err := source.Lookup("postgres")
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := typ.Encoder(e.cfg.Name, "", true, "test").Change(&change.Change{Kind: change.Update, Table: tbl,
				Row: change.Row{change.Text("1234"), change.Text("forged"), change.Text("04:05:06.25+05:30")}}, event.Origin{})
			if err != nil {
				t.Fatal(err)
			}
			forge(e, tbl.ID, msgs[0])
			e.verifyFindsAndRepairs(tbl.ID, "1234")
		})
	}
}

// forge writes an event into the destination's log beside the stream's.
func forge(e *env, id change.TableID, m event.Message) {
	e.t.Helper()
	d := e.cfg.Destination
	switch d.Type {
	case "nats":
		nc, err := natsio.Connect(d.URL)
		if err != nil {
			e.t.Fatal(err)
		}
		defer nc.Close()
		// The default subject of the stream's table (docs/destinations.md).
		subj := "tidemark." + e.cfg.Name + "." + id.Schema + "." + id.Name
		if _, err := nc.Request(subj, m.Value, 10e9); err != nil { // JetStream acknowledges
			e.t.Fatal(err)
		}
	case "kafka":
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.Kafka.Brokers...))
		if err != nil {
			e.t.Fatal(err)
		}
		defer cl.Close()
		rec := &kgo.Record{Topic: kafka.TopicName(kafka.DefaultTopic, e.cfg.Name, id), Key: m.Key, Value: m.Value}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
	}
}
