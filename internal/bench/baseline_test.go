package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark/tidemark/internal/pgserver"
)

// copyBuffer batches the COPY rows pgconn hands over one message at a time
// into larger pipe writes: without it every row is a goroutine hand-off,
// which costs this process about 3 CPU seconds per million rows.
const copyBuffer = 256 << 10

// countingWriter counts the bytes of the COPY stream.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// copyPipe is baseline 1: COPY … TO STDOUT (FORMAT binary) on the source
// piped, concurrently, into COPY … FROM STDIN (FORMAT binary) on an empty
// destination table with the same primary key (created by the caller). It
// returns the rows copied and the bytes of the COPY stream.
func copyPipe(ctx context.Context, srcDSN, dstDSN, table string) (rows, streamBytes int64, err error) {
	name := pgx.Identifier{table}.Sanitize()
	src, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		return 0, 0, fmt.Errorf("connect to source: %w", err)
	}
	defer src.Close(ctx)
	dst, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		return 0, 0, fmt.Errorf("connect to destination: %w", err)
	}
	defer dst.Close(ctx)
	pr, pw := io.Pipe()
	cw := &countingWriter{w: pw}
	bw := bufio.NewWriterSize(cw, copyBuffer)
	var g errgroup.Group
	g.Go(func() error {
		_, err := src.PgConn().CopyTo(ctx, bw, "COPY (SELECT * FROM "+name+") TO STDOUT (FORMAT binary)")
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		if err != nil {
			return fmt.Errorf("copy out of source: %w", err)
		}
		return nil
	})
	tag, err := dst.PgConn().CopyFrom(ctx, pr, "COPY "+name+" FROM STDIN (FORMAT binary)")
	pr.CloseWithError(errors.New("destination COPY ended")) // unblocks the writer if it failed
	if werr := g.Wait(); werr != nil {
		return 0, 0, werr
	}
	if err != nil {
		return 0, 0, fmt.Errorf("copy into destination: %w", err)
	}
	return tag.RowsAffected(), cw.n, nil
}

// nativeSync is baseline 2: PostgreSQL's logical replication initial sync
// of table into dstDSN's database. The timed part is the subscription's
// slot creation, CREATE SUBSCRIPTION … WITH (copy_data = true) and the wait
// until the table's pg_subscription_rel state is 'r' (ready). The caller
// drops the subscription, its slot and the publication with dropNative.
//
// Publisher and subscriber share one server, so the slot cannot be created
// by CREATE SUBSCRIPTION itself (it would wait for its own transaction): it
// is created just before, inside the timing, with create_slot = false.
func nativeSync(ctx context.Context, srv *pgserver.Server, table string) (time.Duration, error) {
	srcDSN, dstDSN := srv.DSN(srcDB), srv.DSN(nativeDB)
	name := pgx.Identifier{table}.Sanitize()
	if err := exec(ctx, dstDSN, fmt.Sprintf(tableDDL, name)); err != nil {
		return 0, fmt.Errorf("create native destination: %w", err)
	}
	if err := exec(ctx, srcDSN, "CREATE PUBLICATION bench_pub FOR TABLE "+name, "CHECKPOINT"); err != nil {
		return 0, fmt.Errorf("create publication: %w", err)
	}
	dst, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		return 0, fmt.Errorf("connect to subscriber: %w", err)
	}
	defer dst.Close(ctx)
	start := time.Now()
	if err := exec(ctx, srcDSN, "SELECT pg_create_logical_replication_slot('bench_sub', 'pgoutput')"); err != nil {
		return 0, fmt.Errorf("create subscription slot: %w", err)
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=postgres sslmode=disable", srv.Port, srcDB)
	_, err = dst.Exec(ctx, "CREATE SUBSCRIPTION bench_sub CONNECTION "+quoteLiteral(conninfo)+" PUBLICATION bench_pub "+
		"WITH (copy_data = true, create_slot = false, slot_name = 'bench_sub')")
	if err != nil {
		return 0, fmt.Errorf("create subscription: %w", err)
	}
	if err := waitReady(ctx, dst, table); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitReady polls the table's subscription state every 5ms until 'r'.
func waitReady(ctx context.Context, dst *pgx.Conn, table string) error {
	deadline := time.Now().Add(30 * time.Minute)
	for {
		var state string
		err := dst.QueryRow(ctx, "SELECT srsubstate::text FROM pg_subscription_rel WHERE srrelid = $1::regclass", table).Scan(&state)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read subscription state: %w", err)
		}
		if state == "r" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("subscription of %s not ready after 30 minutes (state %q)", table, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dropNative drops the subscription (detached from its slot first, since
// dropping the slot through it would again talk to this very server), then
// the slots and the publication on the source.
func dropNative(ctx context.Context, srcDSN, dstDSN string) error {
	err := exec(ctx, dstDSN,
		"ALTER SUBSCRIPTION bench_sub DISABLE",
		"ALTER SUBSCRIPTION bench_sub SET (slot_name = NONE)",
		"DROP SUBSCRIPTION bench_sub")
	if err != nil {
		return fmt.Errorf("drop subscription: %w", err)
	}
	src, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		return fmt.Errorf("connect to source: %w", err)
	}
	defer src.Close(ctx)
	// The walsender takes a moment to exit once the worker stopped; the
	// table sync's own slot is normally gone already.
	const slots = `FROM pg_replication_slots WHERE (slot_name = 'bench_sub' OR slot_name LIKE 'pg\_%\_sync\_%')`
	for i := 0; ; i++ {
		var left int
		if _, err := src.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) "+slots+" AND NOT active"); err != nil {
			return fmt.Errorf("drop subscription slots: %w", err)
		}
		if err := src.QueryRow(ctx, "SELECT count(*) "+slots).Scan(&left); err != nil {
			return fmt.Errorf("list subscription slots: %w", err)
		}
		if left == 0 {
			break
		}
		if i == 200 {
			return fmt.Errorf("%d subscription slots still active after 10s", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := src.Exec(ctx, "DROP PUBLICATION bench_pub"); err != nil {
		return fmt.Errorf("drop publication: %w", err)
	}
	return nil
}

// quoteLiteral is for the few values spliced into DDL.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
