package daemon

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/kafkatest"
	"github.com/tidemark/tidemark/internal/sink/kafka"
)

// TestSIGKILLIntoKafka streams into Kafka (kfake in a child process,
// topics of 3 partitions) while a writer runs and a table is backfilled,
// and kills the daemon twice: once by the failpoint after a transaction's
// records were sent and before it commits, once by the test while chunks
// are read. After restarts a read_committed consumer replays the topic to
// exactly the source's rows and sees no live change twice: the checkpoint
// commits in the records' transaction.
func TestSIGKILLIntoKafka(t *testing.T) {
	ctx := context.Background()
	cluster, err := kafkatest.Start(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	// Fewer rows than the other crash tests: each replay of the topic
	// reads every record, under the race detector.
	e := startEventCrash(t, "kafkacrash", 20_000, fmt.Sprintf(`{type: kafka, brokers: [%q]}`, cluster.Addr),
		"TIDEMARK_TEST_KAFKA_KILL_BEFORE_COMMIT=20")
	e.killedItself("before a transaction's commit")
	e.restartAndKillMidChunks()
	d := config.Destination{Type: "kafka", Kafka: config.Kafka{Brokers: []string{cluster.Addr}}}
	e.waitReplay(func() (*event.Replica, error) { return kafka.ReadTable(ctx, d, e.stream, filesTable) })
	var values [][]byte
	if err := kafka.ReadEvents(ctx, d, e.stream, filesTable.ID, func(r *kgo.Record) error {
		if r.Value != nil {
			values = append(values, r.Value)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if dups := duplicateChanges(t, values); dups != "" {
		t.Errorf("live changes read twice:\n%s", dups)
	}
	e.finish()
}
