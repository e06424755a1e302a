package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark/tidemark/internal/kafkatest"
	"github.com/tidemark/tidemark/internal/natsserver"
)

// A destination's own pipe: the same rows written into what it writes
// to, the plainest way that takes them. The event destinations' pipes
// take each row as the JSON object the source server builds for it
// (row_to_json): a JSON line in a file, a JetStream message, a Kafka
// record — without the events' envelope, checkpoints or chunk marks.
type destPipe struct {
	dest, key string // the destination's and the pipe's result keys
	what      string // the pipe, as the ratio's line names it
}

var destPipes = []destPipe{
	{"dest-sqlite", sqliteInsertKey, "a plain INSERT of the same rows in one transaction (target 0.8×)"},
	{"dest-files_parquet", parquetWriteKey, "a plain Parquet write of the same rows"},
	{"dest-files", "jsonl-write", "the same rows' JSON written as lines to one file"},
	{"dest-nats", "nats-publish", "the same rows' JSON published to a JetStream stream"},
	{"dest-kafka", "kafka-produce", "the same rows' JSON produced to a topic of kfake"},
}

// jsonRowsSelect reads public.t as JSON objects built by the source.
const jsonRowsSelect = `SELECT row_to_json(t)::text FROM public.t t`

// runEventPipes times the pipes of the event destinations that ran.
func (db *destBench) runEventPipes(kinds []string) error {
	if slices.Contains(kinds, "files") {
		if err := db.runJSONLWrite(); err != nil {
			return err
		}
	}
	if slices.Contains(kinds, "nats") {
		if err := db.runNATSPublish(); err != nil {
			return err
		}
	}
	if slices.Contains(kinds, "kafka") {
		return db.runKafkaProduce()
	}
	return nil
}

// eachJSONRow calls put with each row of public.t as JSON (a buffer
// that the next row reuses).
func (db *destBench) eachJSONRow(put func([]byte) error) (int64, error) {
	conn, err := pgx.Connect(db.ctx, db.sv.src.DSN(srcDB))
	if err != nil {
		return 0, fmt.Errorf("connect to source: %w", err)
	}
	defer conn.Close(db.ctx)
	rr := conn.PgConn().ExecParams(db.ctx, jsonRowsSelect, nil, nil, nil, nil)
	var n int64
	for rr.NextRow() {
		if err := put(rr.Values()[0]); err != nil {
			rr.Close()
			return n, err
		}
		n++
	}
	if _, err := rr.Close(); err != nil {
		return n, fmt.Errorf("read the source's rows as JSON: %w", err)
	}
	return n, nil
}

func (db *destBench) runJSONLWrite() error {
	path := filepath.Join(db.b.TempDir(), "plain.jsonl")
	r, err := db.timePipe("jsonl-write", "plain JSONL write", "dest-files", db.sv.dst.PID(),
		"source rows as row_to_json, written as lines to one file, fsynced",
		func() (int64, error) {
			f, err := os.Create(path)
			if err != nil {
				return 0, err
			}
			defer f.Close()
			w := bufio.NewWriterSize(f, 1<<20)
			n, err := db.eachJSONRow(func(row []byte) error {
				if _, err := w.Write(row); err != nil {
					return err
				}
				return w.WriteByte('\n')
			})
			if err == nil {
				err = w.Flush()
			}
			if err == nil {
				err = f.Sync()
			}
			return n, err
		})
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	db.results = append(db.results, destResult{result: r, held: info.Size(), heldWhat: "the one JSONL file"})
	return nil
}

func (db *destBench) runNATSPublish() error {
	srv, err := natsserver.Start(db.ctx, natsserver.Options{})
	if err != nil {
		return fmt.Errorf("plain NATS publish: %w", err)
	}
	defer srv.Stop()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		return fmt.Errorf("plain NATS publish: %w", err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var failed error
	// The destination's timeout; every ack's error counts.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(time.Minute),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			mu.Lock()
			defer mu.Unlock()
			failed = cmp.Or(failed, err)
		}))
	if err != nil {
		return fmt.Errorf("plain NATS publish: %w", err)
	}
	if _, err := js.CreateStream(db.ctx, jetstream.StreamConfig{Name: "pipe", Subjects: []string{"pipe.>"}, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("plain NATS publish: create the stream: %w", err)
	}
	r, err := db.timePipe("nats-publish", "plain JetStream publish", "dest-nats", srv.PID(),
		"source rows as row_to_json, each published asynchronously to one subject of a file-storage stream, every ack awaited and checked",
		func() (int64, error) {
			n, err := db.eachJSONRow(func(row []byte) error {
				_, err := js.PublishAsync("pipe.t", slices.Clone(row)) // kept for a retry
				return err
			})
			if err != nil {
				return n, err
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-db.ctx.Done():
				return n, db.ctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			return n, failed
		})
	if err != nil {
		return err
	}
	held, what, err := natsStreamHeld(db.ctx, js, "pipe")
	if err != nil {
		return err
	}
	db.results = append(db.results, destResult{result: r, held: held, heldWhat: what})
	return nil
}

// natsStreamHeld is a JetStream stream's bytes.
func natsStreamHeld(ctx context.Context, js jetstream.JetStream, name string) (int64, string, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, "", fmt.Errorf("JetStream stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("JetStream stream %s: %w", name, err)
	}
	return int64(info.State.Bytes), fmt.Sprintf("the JetStream stream's bytes, %d messages", info.State.Msgs), nil
}

func (db *destBench) runKafkaProduce() error {
	c, err := kafkatest.Start(db.ctx, kafkaPartitions)
	if err != nil {
		return fmt.Errorf("plain Kafka produce: %w", err)
	}
	defer c.Stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("pipe"))
	if err != nil {
		return fmt.Errorf("plain Kafka produce: %w", err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(db.ctx, kafkaPartitions, -1, nil, "pipe"); err != nil {
		return fmt.Errorf("plain Kafka produce: create the topic: %w", err)
	}
	r, err := db.timePipe("kafka-produce", "plain Kafka produce", "dest-kafka", c.PID(),
		"source rows as row_to_json, each produced asynchronously (franz-go, default batching and acks), flushed at the end",
		func() (int64, error) {
			var mu sync.Mutex
			var failed error
			n, err := db.eachJSONRow(func(row []byte) error {
				cl.Produce(db.ctx, &kgo.Record{Value: slices.Clone(row)}, func(_ *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					failed = cmp.Or(failed, err)
				})
				return nil
			})
			if err != nil {
				return n, err
			}
			if err := cl.Flush(db.ctx); err != nil {
				return n, err
			}
			mu.Lock()
			defer mu.Unlock()
			return n, failed
		})
	if err != nil {
		return err
	}
	db.results = append(db.results, destResult{result: r, held: -1, heldWhat: "not measured: kfake keeps its records in memory"})
	return nil
}
