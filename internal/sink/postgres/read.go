package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgbinary"
	"github.com/tidemark/tidemark/internal/pgsum"
	"github.com/tidemark/tidemark/internal/sink"
)

// ReadRange returns the rows whose key lies in (low, high], in key order,
// as text values.
func (s *Sink) ReadRange(ctx context.Context, t *change.Table, low, high change.Key) ([]change.Row, error) {
	rows, err := s.readRange(ctx, t, low, high)
	if stalePlan(err) {
		s.dropStatements(ctx)
		rows, err = s.readRange(ctx, t, low, high)
	}
	if err != nil {
		return nil, fmt.Errorf("read range of %s: %w", t.ID, err)
	}
	return rows, nil
}

func (s *Sink) readRange(ctx context.Context, t *change.Table, low, high change.Key) ([]change.Row, error) {
	if err := s.ensureConn(ctx); err != nil {
		return nil, err
	}
	ts, err := s.table(t)
	if err != nil {
		return nil, err
	}
	name, err := s.prepare(ctx, ts.selectRangeSQL(low != nil, high != nil))
	if err != nil {
		return nil, err
	}
	// Text results: exactly what the destination's output functions print.
	return textRows(s.conn.PgConn().ExecPrepared(ctx, name, append(keyArgs(low), keyArgs(high)...), nil, nil), nil)
}

var _ sink.SnapshotSummer = (*Sink)(nil)

// SumKind names the checksum SumRange computes.
func (s *Sink) SumKind() string { return pgsum.Kind }

// SumRange counts and checksums the rows whose key lies in (low, high] on
// the server, as a PostgreSQL source sums the same range.
func (s *Sink) SumRange(ctx context.Context, t *change.Table, low, high change.Key) (int, string, error) {
	rows, sum, err := s.sumRange(ctx, t, low, high)
	if stalePlan(err) {
		s.dropStatements(ctx)
		rows, sum, err = s.sumRange(ctx, t, low, high)
	}
	if err != nil {
		return 0, "", fmt.Errorf("sum range of %s: %w", t.ID, err)
	}
	return rows, sum, nil
}

func (s *Sink) sumRange(ctx context.Context, t *change.Table, low, high change.Key) (int, string, error) {
	if err := s.ensureConn(ctx); err != nil {
		return 0, "", err
	}
	ts, err := s.table(t)
	if err != nil {
		return 0, "", err
	}
	name, err := s.prepare(ctx, ts.sumRangeSQL(t, low != nil, high != nil))
	if err != nil {
		return 0, "", err
	}
	return sumOf(s.conn.PgConn().ExecPrepared(ctx, name, append(keyArgs(low), keyArgs(high)...), nil, nil).Read())
}

// sumOf reads a range's count and checksum from its query's result.
func sumOf(res *pgconn.Result) (int, string, error) {
	if res.Err != nil {
		return 0, "", res.Err
	}
	n, err := strconv.Atoi(string(res.Rows[0][0]))
	if err != nil {
		return 0, "", fmt.Errorf("row count %q: %w", res.Rows[0][0], err)
	}
	return n, string(res.Rows[0][1]), nil
}

// paramsPerRead bounds the parameters of one ReadKeys query (PostgreSQL
// takes at most 65,535); a variable for tests.
var paramsPerRead = 30000

// ReadKeys returns the rows with the given keys that the table holds.
func (s *Sink) ReadKeys(ctx context.Context, t *change.Table, keys []change.Key) ([]change.Row, error) {
	if err := s.ensureConn(ctx); err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", t.ID, err)
	}
	ts, err := s.table(t)
	if err != nil {
		return nil, fmt.Errorf("read keys of %s: %w", t.ID, err)
	}
	var rows []change.Row
	per := max(paramsPerRead/len(ts.key), 1)
	for start := 0; start < len(keys); start += per {
		part := keys[start:min(start+per, len(keys))]
		args := make([][]byte, 0, len(part)*len(ts.key))
		for _, k := range part {
			args = append(args, keyArgs(k)...)
		}
		rr := s.conn.PgConn().ExecParams(ctx, ts.selectKeysSQL(len(part)), args, nil, nil, nil)
		if rows, err = textRows(rr, rows); err != nil {
			return nil, fmt.Errorf("read keys of %s: %w", t.ID, err)
		}
	}
	return rows, nil
}

// textRows appends a result's rows, as text values, to rows.
func textRows(rr *pgconn.ResultReader, rows []change.Row) ([]change.Row, error) {
	for rr.NextRow() {
		rows = append(rows, textRow(rr.Values()))
	}
	if _, err := rr.Close(); err != nil {
		return nil, err
	}
	return rows, nil
}

// textRow is a row of text results, copied out of the reader's buffer.
func textRow(vals [][]byte) change.Row { return pgbinary.Row(vals, nil) }

// maxSnapshotSums bounds the connections that sum ranges in snapshots
// (SumLater): a verify that trails a load has one range's sum outstanding
// at a time; with that many running, SumLater refuses (errSumsBusy) rather
// than make the stream wait, and the caller sums on the sink's connection.
// An idle one is closed after summerIdle: the server's connections are
// shared, and a verify's are not needed between loads.
const (
	maxSnapshotSums = 2
	summerIdle      = 10 * time.Second
)

// errSumsBusy: every connection SumLater may use is summing.
var errSumsBusy = errors.New("every connection that sums in a snapshot is busy")

// SumLater takes a snapshot of the destination as committed now (a
// repeatable-read transaction's first statement, on a connection of a
// small pool of its own) and sums the range in it in the background; the
// sink's connection is free again at once.
func (s *Sink) SumLater(ctx context.Context, t *change.Table, low, high change.Key) (func(context.Context) (int, string, error), error) {
	pool, err := s.summers(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := s.table(t)
	if err != nil {
		return nil, err
	}
	sql, args := ts.sumRangeSQL(t, low != nil, high != nil), append(keyArgs(low), keyArgs(high)...)
	if pool.Stat().AcquiredConns() >= maxSnapshotSums {
		return nil, errSumsBusy // only this goroutine acquires: no wait below
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("sum range of %s: %w", t.ID, err)
	}
	// One round trip: the table's lock first, held until the sum is done
	// (a rewriting ALTER TABLE is not MVCC-safe), then the SELECT, the
	// transaction's first statement to need one, takes the snapshot.
	snapshot := "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; LOCK TABLE " + ts.name + " IN ACCESS SHARE MODE; SELECT 1"
	if _, err := c.Conn().PgConn().Exec(ctx, snapshot).ReadAll(); err != nil {
		c.Release() // in a transaction or broken: the pool closes it
		return nil, fmt.Errorf("sum range of %s: take a snapshot: %w", t.ID, err)
	}
	type summed struct {
		rows int
		sum  string
		err  error
	}
	done := make(chan summed, 1)
	go func() {
		var r summed
		r.rows, r.sum, r.err = sumIn(ctx, c.Conn(), sql, args)
		// A failed ROLLBACK leaves the connection in its transaction:
		// Release closes it then. The sum stands either way.
		_, _ = c.Conn().PgConn().Exec(ctx, "ROLLBACK").ReadAll()
		c.Release()
		if r.err != nil {
			r.err = fmt.Errorf("sum range of %s: %w", t.ID, r.err)
		}
		done <- r
	}()
	return func(ctx context.Context) (int, string, error) {
		select {
		case r := <-done:
			return r.rows, r.sum, r.err
		case <-ctx.Done():
			return 0, "", ctx.Err()
		}
	}, nil
}

// sumIn runs a range's sum on conn, its statement prepared once a
// connection (pgx.Conn.Prepare is idempotent).
func sumIn(ctx context.Context, conn *pgx.Conn, sql string, args [][]byte) (int, string, error) {
	name := statementName(sql)
	if _, err := conn.Prepare(ctx, name, sql); err != nil {
		return 0, "", err
	}
	return sumOf(conn.PgConn().ExecPrepared(ctx, name, args, nil, nil).Read())
}

// summers is the pool SumLater takes its snapshots on, opened at its
// first use with the sink's connection settings.
func (s *Sink) summers(ctx context.Context) (*pgxpool.Pool, error) {
	if s.sumPool != nil {
		return s.sumPool, nil
	}
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pc.ConnConfig = s.cfg.Copy()
	pc.MaxConns, pc.MinConns = maxSnapshotSums, 0
	pc.MaxConnIdleTime, pc.HealthCheckPeriod = summerIdle, summerIdle/2
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres sink %s:%d/%s to sum ranges: %w", s.cfg.Host, s.cfg.Port, s.cfg.Database, err)
	}
	s.sumPool = pool
	return pool, nil
}
