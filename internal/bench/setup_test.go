package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/pgserver"
)

// params are the benchmark's sizes; the environment may override them for
// quicker experiments (see docs/benchmark.md).
type params struct {
	rows      int64 // rows of public.t
	smallRows int64 // rows of public.t_small, the memory check
	chunkSize int
	// chunkWrite is tidemark's backfill.chunk_write_target ("" for the
	// default).
	chunkWrite string
}

func readParams() (params, error) {
	p := params{rows: 1_000_000, smallRows: 250_000, chunkSize: 10_000}
	for _, v := range []struct {
		env string
		dst *int64
	}{{"TIDEMARK_BENCH_ROWS", &p.rows}, {"TIDEMARK_BENCH_SMALL_ROWS", &p.smallRows}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 {
				return p, fmt.Errorf("%s=%q: want a positive number of rows", v.env, s)
			}
			*v.dst = n
		}
	}
	if s := os.Getenv("TIDEMARK_BENCH_CHUNK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, fmt.Errorf("TIDEMARK_BENCH_CHUNK=%q: want a positive chunk size", s)
		}
		p.chunkSize = n
	}
	if s := os.Getenv("TIDEMARK_BENCH_CHUNK_WRITE"); s != "" {
		if d, err := time.ParseDuration(s); err != nil || d < 0 {
			return p, fmt.Errorf("TIDEMARK_BENCH_CHUNK_WRITE=%q: want a duration such as 20ms, or 0", s)
		}
		p.chunkWrite = s
	}
	return p, nil
}

// begin is how each benchmark starts: an environment without PG*
// variables, its params, and a context that ends before -timeout 60m.
func begin(b *testing.B) (params, context.Context, context.CancelFunc) {
	pgserver.ScrubEnv()
	p, err := readParams()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	return p, ctx, cancel
}

// Database names: srcDB on the source server, the others on the
// destination server.
const (
	srcDB      = "src"
	copyDB     = "dst_copy"
	nativeDB   = "dst_native"
	tidemarkDB = "dst_tidemark"
)

// tableDDL is the benchmark table; %s is its name.
const tableDDL = `CREATE TABLE %s (id bigint PRIMARY KEY, customer_id int, status text,
	amount numeric(12,2), note text, payload jsonb, created_at timestamptz, updated_at timestamptz)`

// fillSQL generates $1 rows of about 200 bytes each (heap, TOAST and the
// primary key index, as pg_total_relation_size counts them). TABLE is
// replaced by the table's name.
const fillSQL = `INSERT INTO TABLE
SELECT g,
       1 + (g * 7919) % 50000,
       (ARRAY['new','paid','packed','shipped','delivered','returned'])[1 + g % 6],
       round(((g * 104729) % 10000000) / 100.0, 2),
       'order ' || g || ' ' || left(md5(g::text), 20 + (g % 13)::int),
       jsonb_build_object('sku', 'SKU-' || lpad((g % 9973)::text, 5, '0'), 'qty', 1 + g % 9, 'gift', g % 7 = 0),
       timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds',
       timestamptz '2024-01-01 00:00:00+00' + g * interval '17 seconds' + (g % 86400) * interval '1 second'
FROM generate_series(1::bigint, $1::bigint) AS g`

// servers are the two throwaway servers: the source database lives on one,
// every destination database on the other, as in production where they are
// different machines (here they share the two cores). A replication slot on
// the source thus never decodes the destination's writes.
type servers struct{ src, dst *pgserver.Server }

// startServers starts both servers and creates the databases. Autovacuum
// is off so that no background vacuum of a freshly loaded table competes
// for the two cores during a timed run; the benchmark vacuums explicitly
// between runs instead.
func startServers(ctx context.Context) (servers, error) {
	opts := pgserver.Options{Settings: map[string]string{"autovacuum": "off", "max_wal_size": "4GB"}}
	var sv servers
	var err error
	if sv.src, err = pgserver.Start(ctx, opts); err != nil {
		return sv, fmt.Errorf("start source PostgreSQL: %w", err)
	}
	if sv.dst, err = pgserver.Start(ctx, opts); err != nil {
		sv.stop()
		return sv, fmt.Errorf("start destination PostgreSQL: %w", err)
	}
	if _, err := sv.src.CreateDatabase(ctx, srcDB); err != nil {
		sv.stop()
		return sv, fmt.Errorf("create database: %w", err)
	}
	for _, db := range []string{copyDB, nativeDB, tidemarkDB} {
		if _, err := sv.dst.CreateDatabase(ctx, db); err != nil {
			sv.stop()
			return sv, fmt.Errorf("create database: %w", err)
		}
	}
	return sv, nil
}

func (sv servers) stop() {
	sv.src.Stop() // Stop accepts a nil server
	sv.dst.Stop()
}

// checkpoint flushes both servers' dirty buffers so that no run pays for
// the previous one's writes.
func (sv servers) checkpoint(ctx context.Context) error {
	for _, s := range []*pgserver.Server{sv.src, sv.dst} {
		if err := exec(ctx, s.DSN("postgres"), "CHECKPOINT"); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	return nil
}

// sourceInfo describes the loaded source table.
type sourceInfo struct {
	rows, bytes int64 // count(*) and pg_total_relation_size
	version     string
}

// loadSource creates and fills public.<table> with n rows, freezes it (so
// no reader pays for hint bits) and measures it.
func loadSource(ctx context.Context, dsn, table string, n int64) (sourceInfo, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return sourceInfo{}, fmt.Errorf("connect to source: %w", err)
	}
	defer conn.Close(ctx)
	name := pgx.Identifier{table}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf(tableDDL, name)); err != nil {
		return sourceInfo{}, fmt.Errorf("create source table %s: %w", table, err)
	}
	if _, err := conn.Exec(ctx, strings.Replace(fillSQL, "TABLE", name, 1), n); err != nil {
		return sourceInfo{}, fmt.Errorf("fill source table %s: %w", table, err)
	}
	if _, err := conn.Exec(ctx, "VACUUM (FREEZE, ANALYZE) "+name); err != nil {
		return sourceInfo{}, fmt.Errorf("vacuum source table %s: %w", table, err)
	}
	var info sourceInfo
	err = conn.QueryRow(ctx, "SELECT count(*), pg_total_relation_size($1::regclass), current_setting('server_version') FROM "+name, table).
		Scan(&info.rows, &info.bytes, &info.version)
	if err != nil {
		return sourceInfo{}, fmt.Errorf("measure source table %s: %w", table, err)
	}
	return info, nil
}

// exec runs statements on a fresh connection to dsn.
func exec(ctx context.Context, dsn string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// countRows counts a table's rows (a sanity check after each run); table
// is its name, or its schema and name.
func countRows(ctx context.Context, dsn string, table ...string) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier(table).Sanitize()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count rows of %s: %w", strings.Join(table, "."), err)
	}
	return n, nil
}
