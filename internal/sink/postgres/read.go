package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgsum"
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
	res := s.conn.PgConn().ExecPrepared(ctx, name, append(keyArgs(low), keyArgs(high)...), nil, nil).Read()
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
		vals := rr.Values()
		row := make(change.Row, len(vals))
		for i, v := range vals {
			if v == nil {
				row[i] = change.Null
			} else {
				row[i] = change.Text(string(v))
			}
		}
		rows = append(rows, row)
	}
	if _, err := rr.Close(); err != nil {
		return nil, err
	}
	return rows, nil
}
