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
// of table from the source server into the destination server's nativeDB.
// The timed part is CREATE SUBSCRIPTION … WITH (copy_data = true), which
// also creates the slot on the source, and the wait until the table's
// pg_subscription_rel state is 'r' (ready). The caller drops the
// subscription (and with it its slot) and the publication with dropNative.
func nativeSync(ctx context.Context, sv servers, table string) (time.Duration, error) {
	srcDSN, dstDSN := sv.src.DSN(srcDB), sv.dst.DSN(nativeDB)
	name := pgx.Identifier{table}.Sanitize()
	if err := exec(ctx, dstDSN, fmt.Sprintf(tableDDL, name)); err != nil {
		return 0, fmt.Errorf("create native destination: %w", err)
	}
	if err := exec(ctx, srcDSN, "CREATE PUBLICATION bench_pub FOR TABLE "+name); err != nil {
		return 0, fmt.Errorf("create publication: %w", err)
	}
	dst, err := pgx.Connect(ctx, dstDSN)
	if err != nil {
		return 0, fmt.Errorf("connect to subscriber: %w", err)
	}
	defer dst.Close(ctx)
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=postgres sslmode=disable", sv.src.Port, srcDB)
	start := time.Now()
	_, err = dst.Exec(ctx, "CREATE SUBSCRIPTION bench_sub CONNECTION "+quoteLiteral(conninfo)+
		" PUBLICATION bench_pub WITH (copy_data = true)")
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

// dropNative drops the subscription, which drops its slot on the source,
// then the publication; it checks that no slot is left behind.
func dropNative(ctx context.Context, sv servers) error {
	if err := exec(ctx, sv.dst.DSN(nativeDB), "DROP SUBSCRIPTION IF EXISTS bench_sub"); err != nil {
		return fmt.Errorf("drop subscription: %w", err)
	}
	src, err := pgx.Connect(ctx, sv.src.DSN(srcDB))
	if err != nil {
		return fmt.Errorf("connect to source: %w", err)
	}
	defer src.Close(ctx)
	if _, err := src.Exec(ctx, "DROP PUBLICATION IF EXISTS bench_pub"); err != nil {
		return fmt.Errorf("drop publication: %w", err)
	}
	var left int
	if err := src.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots").Scan(&left); err != nil {
		return fmt.Errorf("list replication slots: %w", err)
	}
	if left > 0 {
		return fmt.Errorf("%d replication slots left on the source after dropping the subscription", left)
	}
	return nil
}

// quoteLiteral is for the few values spliced into DDL.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
