package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/pgserver"
)

// The MariaDB benchmark's source database and table, and the statements
// that make them. The table has the column kinds a MySQL source converts
// most: a BIGINT key, INT, VARCHAR (one nullable), DECIMAL and
// DATETIME(6).
const (
	myDB       = "src"
	myTable    = "t"
	myTableDDL = "CREATE TABLE t (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(16) NOT NULL, " +
		"amount DECIMAL(12,2) NOT NULL, note VARCHAR(64), created_at DATETIME(6) NOT NULL)"
	// myFillSQL inserts the rows lo..hi (%d, %d): a note of 30–45
	// characters, NULL one row in ten.
	myFillSQL = `INSERT INTO t SELECT seq, 1 + (seq * 7919) %% 50000,
	ELT(1 + seq %% 6, 'new', 'paid', 'packed', 'shipped', 'delivered', 'returned'),
	ROUND(((seq * 104729) %% 10000000) / 100.0, 2),
	IF(seq %% 10 = 0, NULL, CONCAT('order ', seq, ' ', LEFT(MD5(seq), 20 + seq %% 13))),
	TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * 17 SECOND + INTERVAL seq %% 1000000 MICROSECOND
	FROM seq_%d_to_%d`
	// mySelect is what the pipe's client reads.
	mySelect = "SELECT id, customer_id, status, amount, note, created_at FROM t"
	// pgPipeDDL is the pipe's destination: the table tidemark's PostgreSQL
	// sink creates for t (docs/type-mapping.md), in the schema named after
	// the MySQL database as tidemark's.
	pgPipeDDL = `CREATE TABLE src.t (id bigint PRIMARY KEY, customer_id integer NOT NULL, status varchar(16) NOT NULL,
	amount numeric(12,2) NOT NULL, note varchar(64), created_at timestamp(6) NOT NULL)`
	// pgPipeCopy reads the client's batch output: tab-separated, NULL
	// written as the word NULL (no value of the table is that word).
	pgPipeCopy = "COPY src.t FROM STDIN (NULL 'NULL')"
)

// BenchmarkMySQL prints figures, not pass/fail: a MariaDB table of a
// million rows copied into PostgreSQL by a pipe of the database clients
// (mariadb --batch into psql's COPY) and by a tidemark backfill through a
// stream with a mysql source, alternately, reps times each, each run into
// a fresh destination database; the medians and their ratio. It runs once
// whatever b.N is: `make bench` passes -benchtime 1x.
func BenchmarkMySQL(b *testing.B) {
	p, ctx, cancel := begin(b)
	defer cancel()
	reps, err := readReps()
	if err != nil {
		b.Fatal(err)
	}
	mb := &myBench{b: b, ctx: ctx, p: p, reps: reps, hwm: checkPeakReset(), started: time.Now()}
	if err := mb.start(); err != nil {
		b.Fatal(err)
	}
	defer mb.stop()
	if err := mb.load(); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= reps; i++ {
		if err := mb.runPipe(i); err != nil {
			b.Fatal(err)
		}
		if err := mb.runTidemark(i); err != nil {
			b.Fatal(err)
		}
	}
	mb.print(os.Stdout)
	mb.report()
}

// readReps reads TIDEMARK_BENCH_MYSQL_REPS [3].
func readReps() (int, error) {
	s := os.Getenv("TIDEMARK_BENCH_MYSQL_REPS")
	if s == "" {
		return 3, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("TIDEMARK_BENCH_MYSQL_REPS=%q: want a positive number of repetitions", s)
	}
	return n, nil
}

// myBench is one run of BenchmarkMySQL: its servers, the source table and
// the timed runs.
type myBench struct {
	b       *testing.B
	ctx     context.Context
	p       params
	reps    int
	hwm     bool // VmHWM can be reset: peaks are VmHWM, else sampled
	started time.Time
	my      *mysqlserver.Server
	dst     *pgserver.Server
	bytes   int64  // the source table's data_length + index_length
	version string // MariaDB's
	digest  string // of the destination table the first run left
	results []result
}

func (mb *myBench) logf(format string, args ...any) {
	fmt.Printf("bench %6.1fs  %s\n", time.Since(mb.started).Seconds(), fmt.Sprintf(format, args...))
}

// start starts the throwaway MariaDB (with a buffer pool that holds the
// table, so that no run reads it from disk) and the destination
// PostgreSQL, configured as BenchmarkBackfill's.
func (mb *myBench) start() error {
	var err error
	mb.my, err = mysqlserver.Start(mb.ctx, mysqlserver.Options{Settings: map[string]string{"innodb-buffer-pool-size": "512M"}})
	if err != nil {
		return fmt.Errorf("start MariaDB: %w", err)
	}
	mb.dst, err = pgserver.Start(mb.ctx, pgserver.Options{Settings: map[string]string{"autovacuum": "off", "max_wal_size": "4GB"}})
	if err != nil {
		return fmt.Errorf("start destination PostgreSQL: %w", err)
	}
	return nil
}

func (mb *myBench) stop() {
	mb.my.Stop() // Stop accepts a nil server
	mb.dst.Stop()
}

// load creates src.t on MariaDB and fills it server-side in batches of
// 100,000 rows, without binlogging them (no stream is running yet).
func (mb *myBench) load() error {
	mb.logf("loading %d rows into MariaDB %s.%s", mb.p.rows, myDB, myTable)
	if _, err := mb.my.CreateDatabase(mb.ctx, myDB); err != nil {
		return err
	}
	c, err := mb.my.Root(mb.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	stmts := []string{"SET SESSION sql_log_bin = 0", "USE " + mysqlserver.QuoteIdent(myDB), myTableDDL}
	const batch = 100_000
	for lo := int64(1); lo <= mb.p.rows; lo += batch {
		stmts = append(stmts, fmt.Sprintf(myFillSQL, lo, min(lo+batch-1, mb.p.rows)))
	}
	for _, q := range append(stmts, "ANALYZE TABLE t") {
		if _, err := c.Execute(q); err != nil {
			return fmt.Errorf("load the source table: %s: %w", q, err)
		}
	}
	res, err := c.Execute("SELECT (SELECT count(*) FROM t), data_length + index_length, version() "+
		"FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", myDB, myTable)
	if err != nil {
		return fmt.Errorf("measure the source table: %w", err)
	}
	rows, _ := res.GetInt(0, 0)
	mb.bytes, _ = res.GetInt(0, 1)
	mb.version, _ = res.GetString(0, 2)
	if rows != mb.p.rows {
		return fmt.Errorf("the source table holds %d rows, want %d", rows, mb.p.rows)
	}
	mb.logf("%s.%s: %d rows, %d bytes (data_length + index_length), MariaDB %s", myDB, myTable, rows, mb.bytes, mb.version)
	return nil
}

// measure runs one timed step after a checkpoint of the destination.
func (mb *myBench) measure(r result, run func() (time.Duration, error)) error {
	if err := exec(mb.ctx, mb.dst.DSN("postgres"), "CHECKPOINT"); err != nil {
		return fmt.Errorf("before %s: checkpoint: %w", r.name, err)
	}
	mb.logf("%s …", r.name)
	r, err := timeRun(r, mb.hwm, func() cpuTimes { return readCPUOf(mb.my.PID(), mb.dst.PID()) }, run)
	if err != nil {
		return err
	}
	mb.logf("%s: %.2fs, %.0f rows/s", r.name, r.elapsed.Seconds(), r.rowsPerSec())
	mb.results = append(mb.results, r)
	return nil
}

// runPipe is the baseline, repetition i: the mariadb client's batch
// output piped into psql's COPY, into an empty table in a fresh database.
func (mb *myBench) runPipe(i int) error {
	db := fmt.Sprintf("dst_pipe_%d", i)
	dst, err := mb.dst.CreateDatabase(mb.ctx, db)
	if err != nil {
		return err
	}
	if err := exec(mb.ctx, dst, "CREATE SCHEMA src", pgPipeDDL); err != nil {
		return fmt.Errorf("create the pipe's destination: %w", err)
	}
	r := result{key: "mysql-pipe", name: fmt.Sprintf("pipe, mariadb | psql COPY (%d)", i), rows: mb.p.rows, bytes: mb.bytes}
	var rss [2]int64
	err = mb.measure(r, func() (time.Duration, error) {
		start := time.Now()
		var err error
		rss, err = clientPipe(mb.ctx, mb.my, dst)
		return time.Since(start), err
	})
	if err != nil {
		return err
	}
	last := &mb.results[len(mb.results)-1]
	last.peak = rss[0] + rss[1]
	last.note = fmt.Sprintf("peak RSS of the clients: mariadb %.0f MiB, psql %.0f MiB", float64(rss[0])/(1<<20), float64(rss[1])/(1<<20))
	return mb.dropDatabase(db)
}

// clientPipe runs `mariadb --batch --quick --raw --skip-column-names -e
// mySelect` against the throwaway MariaDB (over TCP to its port, the
// password in MYSQL_PWD) with its output on an OS pipe into `psql -c
// pgPipeCopy` against dstDSN. It returns each client's peak RSS.
func clientPipe(ctx context.Context, my *mysqlserver.Server, dstDSN string) ([2]int64, error) {
	var rss [2]int64
	r, w, err := os.Pipe()
	if err != nil {
		return rss, fmt.Errorf("pipe: %w", err)
	}
	var outErr, inErr, inOut bytes.Buffer
	out := osexec.CommandContext(ctx, "mariadb", "--no-defaults", "--batch", "--quick", "--raw", "--skip-column-names",
		"--protocol=TCP", "--host=127.0.0.1", "--port="+strconv.Itoa(my.Port), "--user="+mysqlserver.User,
		"--database="+myDB, "--execute="+mySelect)
	out.Env = append(os.Environ(), "MYSQL_PWD="+mysqlserver.Password)
	out.Stdout, out.Stderr = w, &outErr
	in := osexec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--dbname="+dstDSN, "--command="+pgPipeCopy)
	in.Stdin, in.Stdout, in.Stderr = r, &inOut, &inErr
	if err := in.Start(); err != nil {
		r.Close()
		w.Close()
		return rss, fmt.Errorf("start psql: %w", err)
	}
	err = out.Start()
	r.Close() // the children hold their ends
	w.Close()
	if err != nil {
		_ = in.Wait() // sees EOF: the pipe's write end is closed
		return rss, fmt.Errorf("start mariadb: %w", err)
	}
	outWait, inWait := out.Wait(), in.Wait()
	rss[0], rss[1] = maxRSS(out.ProcessState), maxRSS(in.ProcessState)
	if outWait != nil {
		return rss, fmt.Errorf("mariadb: %w: %s", outWait, outErr.Bytes())
	}
	if inWait != nil {
		return rss, fmt.Errorf("psql: %w: %s%s", inWait, inOut.Bytes(), inErr.Bytes())
	}
	return rss, nil
}

// maxRSS is an ended child's peak RSS in bytes (ru_maxrss is in KiB).
func maxRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}

// runTidemark is tidemark, repetition i: a stream from the MariaDB
// database into a fresh destination database, started and running before
// the clock starts; then a backfill of src.t through the normal path,
// timed from Initiate until the object is Completed and Loaded.
func (mb *myBench) runTidemark(i int) error {
	db := fmt.Sprintf("dst_tidemark_%d", i)
	dst, err := mb.dst.CreateDatabase(mb.ctx, db)
	if err != nil {
		return err
	}
	tm, err := startStream(mb.ctx, "mysql", mb.my.DSN(myDB), myDB, dst, mb.b.TempDir(), mb.p)
	if err != nil {
		return err
	}
	r := result{key: "mysql-tidemark", name: fmt.Sprintf("tidemark backfill (%d)", i), rows: mb.p.rows, bytes: mb.bytes}
	var note string
	err = mb.measure(r, func() (time.Duration, error) {
		d, rec, err := tm.backfill(mb.ctx, myTable)
		note = fmt.Sprintf("%d chunks, %d rows written, %d retries, %d window conflicts",
			rec.Chunks, rec.RowsWritten, rec.Retries, rec.WindowConflicts)
		return d, err
	})
	if serr := tm.stop(); err == nil && serr != nil {
		err = fmt.Errorf("stop the stream: %w", serr)
	}
	if err != nil {
		return err
	}
	mb.results[len(mb.results)-1].note = note
	return mb.dropDatabase(db)
}

// dropDatabase checks that a run left every row in src.t of the
// destination database db, the same values as every other run, and drops
// db, so that the next runs start alike.
func (mb *myBench) dropDatabase(db string) error {
	n, err := countRows(mb.ctx, mb.dst.DSN(db), myDB, myTable)
	if err != nil {
		return err
	}
	if n != mb.p.rows {
		return fmt.Errorf("%s: src.t holds %d rows, want %d", db, n, mb.p.rows)
	}
	if err := mb.checkDigest(db); err != nil {
		return err
	}
	if err := exec(mb.ctx, mb.dst.DSN("postgres"), "DROP DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	return nil
}

// checkDigest compares an md5 of src.t's rows in the destination database
// db, as PostgreSQL prints them in key order, with the first run's: the
// pipe and tidemark must have written the same values.
func (mb *myBench) checkDigest(db string) error {
	conn, err := pgx.Connect(mb.ctx, mb.dst.DSN(db))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(mb.ctx)
	var digest string
	err = conn.QueryRow(mb.ctx, "SELECT md5(string_agg(t::text, E'\\n' ORDER BY id)) FROM src.t AS t").Scan(&digest)
	if err != nil {
		return fmt.Errorf("digest of %s.src.t: %w", db, err)
	}
	if mb.digest == "" {
		mb.digest = digest
	} else if digest != mb.digest {
		return fmt.Errorf("%s.src.t differs from the first run's table (md5 %s, want %s)", db, digest, mb.digest)
	}
	return nil
}
