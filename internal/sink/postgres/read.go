package postgres

import (
	"context"
	"fmt"

	"github.com/tidemark/tidemark/internal/change"
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
	rr := s.conn.PgConn().ExecPrepared(ctx, name, append(keyArgs(low), keyArgs(high)...), nil, nil)
	var rows []change.Row
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
