package bench

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark/tidemark/internal/kafkatest"
	"github.com/tidemark/tidemark/internal/natsserver"
)

// kafkaPartitions is the partition count of the topic the Kafka
// destination creates: chunk marks go to every partition.
const kafkaPartitions = 3

// destination is one destination ready for a stream: started, if it is a
// server, before the clock starts.
type destination struct {
	yaml string // the stream's destination, a YAML flow mapping
	pid  int    // the process that serves it, for its CPU time
	// held measures, after the backfill of the stream named stream, the
	// bytes the destination holds (-1: not measured) and says what they are.
	held func(ctx context.Context, stream string) (int64, string, error)
	stop func()
	path string // the SQLite destination's file
}

// openDestination readies a destination of the given kind: the postgres
// destination is sv.dst's database tidemarkDB, files go under dir, NATS
// and Kafka are a throwaway nats-server and kfake process of their own.
func openDestination(ctx context.Context, kind string, sv servers, dir string) (destination, error) {
	switch kind {
	case "postgres":
		dsn := sv.dst.DSN(tidemarkDB)
		return destination{yaml: fmt.Sprintf(`{type: postgres, dsn: "%s"}`, dsn), pid: sv.dst.PID(), stop: func() {},
			held: func(ctx context.Context, _ string) (int64, string, error) { return pgHeld(ctx, dsn) }}, nil
	case "files", "files_parquet":
		path, format := filepath.Join(dir, "files"), "jsonl"
		if kind == "files_parquet" {
			format = "parquet"
		}
		// No server: the destination's CPU column is the idle destination
		// PostgreSQL's.
		return destination{yaml: fmt.Sprintf(`{type: files, path: "%s", format: %s}`, path, format), pid: sv.dst.PID(), stop: func() {},
			held: func(context.Context, string) (int64, string, error) { return filesHeld(path, format) }}, nil
	case "sqlite":
		path := filepath.Join(dir, "dest.db")
		// No server: the destination's CPU column is the idle destination
		// PostgreSQL's, and SQLite's work is this process's.
		return destination{yaml: fmt.Sprintf(`{type: sqlite, path: "%s"}`, path), pid: sv.dst.PID(), stop: func() {}, path: path,
			held: func(context.Context, string) (int64, string, error) { return sqliteHeld(path) }}, nil
	case "nats":
		srv, err := natsserver.Start(ctx, natsserver.Options{})
		if err != nil {
			return destination{}, err
		}
		return destination{yaml: fmt.Sprintf(`{type: nats, url: "%s"}`, srv.URL()), pid: srv.PID(), stop: srv.Stop,
			held: func(ctx context.Context, stream string) (int64, string, error) {
				return natsHeld(ctx, srv.URL(), stream)
			}}, nil
	case "kafka":
		c, err := kafkatest.Start(ctx, kafkaPartitions)
		if err != nil {
			return destination{}, err
		}
		return destination{yaml: fmt.Sprintf(`{type: kafka, brokers: ["%s"], partitions: %d}`, c.Addr, kafkaPartitions),
			pid: c.PID(), stop: c.Stop,
			held: func(context.Context, string) (int64, string, error) {
				return -1, "not measured: kfake keeps its records in memory", nil
			}}, nil
	}
	return destination{}, fmt.Errorf("no destination type %q in the benchmark", kind)
}

// pgHeld is the destination table's pg_total_relation_size, after
// checking that it holds the source's rows.
func pgHeld(ctx context.Context, dsn string) (int64, string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var n, size int64
	if err := conn.QueryRow(ctx, "SELECT count(*), pg_total_relation_size('public.t') FROM public.t").Scan(&n, &size); err != nil {
		return 0, "", fmt.Errorf("measure public.t: %w", err)
	}
	return size, fmt.Sprintf("pg_total_relation_size of public.t, %d rows", n), nil
}

// filesHeld is the size of every file under path: the data files (in
// format), the manifests and the checkpoint.
func filesHeld(path, format string) (int64, string, error) {
	var size, files int64
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size, files = size+info.Size(), files+1
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("size of %s: %w", path, err)
	}
	return size, fmt.Sprintf("the size of the %d files under path (%s, manifests, checkpoint)", files, format), nil
}

// natsHeld is the bytes of the JetStream stream the destination created
// for the tidemark stream (its default name).
func natsHeld(ctx context.Context, url, stream string) (int64, string, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, "", fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, "", err
	}
	return natsStreamHeld(ctx, js, "tidemark_"+stream)
}
