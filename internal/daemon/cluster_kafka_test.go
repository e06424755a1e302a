package daemon

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/kafkatest"
	"github.com/tidemark/tidemark/internal/sink/kafka"
	"github.com/tidemark/tidemark/internal/source"
)

// TestClusterFencingKafka is TestClusterFencing with a Kafka destination
// (kfake in a child process, reached by every node over loopback), which
// any node may run without a pin: the owner is frozen with SIGSTOP
// mid-backfill under a writer, another node takes the stream over and
// restarts its transactional producer, and the frozen node is resumed. A
// read_committed replay of the topic equals the source's rows, and no live
// change is in it twice: had the former owner's open transaction committed
// after the new owner read the checkpoint, the changes it held would be.
func TestClusterFencingKafka(t *testing.T) {
	ctx := context.Background()
	kc, err := kafkatest.Start(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Stop)
	src, _ := crashSource(t, ctx, "cluster_kafka_src", fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, fencingRows))
	c := newCluster(t, "cluster_kafka", crashStreamYAML(src, "cluster_kafka", fmt.Sprintf(`{type: kafka, brokers: [%q]}`, kc.Addr)))
	c.src = src
	c.freezeOwnerThroughBackfill(fencingRows)
	d := config.Destination{Type: "kafka", Kafka: config.Kafka{Brokers: []string{kc.Addr}}}
	conn, err := pgx.Connect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	typ, err := source.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	enc := typ.Encoder("crash", "", true, "test")
	var diff string
	defer func() {
		if diff != "" {
			t.Logf("the replay's last difference from the source: %s", diff)
		}
	}()
	// One read of the topic serves both checks (each read takes tens of
	// seconds under the race detector).
	var values [][]byte
	c.waitFor("the topic to replay to the source's rows", func() bool {
		values = values[:0]
		r, err := kafka.ReadTable(ctx, d, "crash", filesTable, func(v []byte) {
			if v != nil {
				values = append(values, v)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		diff = replayDiff(t, ctx, conn, enc, r)
		return diff == ""
	})
	if dups := duplicateChanges(t, values); dups != "" {
		t.Errorf("live changes committed twice (the former owner's transaction got in):\n%s", dups)
	}
}
