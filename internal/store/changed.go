package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ChangedDate is a value a tracked date column had or has in a row a
// backfill changed in the destination (docs/lineage.md).
type ChangedDate struct {
	Stream     string `json:"stream"`
	BackfillID int64  `json:"backfill_id"`
	Object     string `json:"object"`
	Column     string `json:"column"`
	Value      string `json:"value"`
}

// changedDatesPerInsert bounds one INSERT's rows (5 or 6 values each).
const changedDatesPerInsert = 500

// RecordChangedDates stores ds in one transaction; a value recorded
// before is kept as it is, so recording a batch again (a retried apply)
// changes nothing.
func (s *Store) RecordChangedDates(ctx context.Context, ds []ChangedDate) error {
	if len(ds) == 0 {
		return nil
	}
	at := s.d.timeArg(now())
	// A stream's write, not the batch engine's: fenced by the stream's
	// lease (WithWriteFence), not the batch engine's.
	err := s.writeTx(ctx, "tx batch_write", func(tx *sql.Tx) error {
		if err := s.checkWriteFence(ctx, tx); err != nil {
			return err
		}
		return s.batchBulkInsert(ctx, tx, `"changed_dates"`, `"stream", "backfill_id", "object", "column_name", "value", "at"`, 6, changedDatesPerInsert, len(ds),
			func(args []any, i int) []any {
				d := ds[i]
				return append(args, d.Stream, d.BackfillID, d.Object, d.Column, d.Value, at)
			}, ` ON CONFLICT DO NOTHING`)
	})
	if err != nil {
		return fmt.Errorf("record changed dates of stream %s: %w", ds[0].Stream, err)
	}
	return nil
}

// ChangedDates returns what backfill id of stream changed, by object,
// column and value.
func (s *Store) ChangedDates(ctx context.Context, stream string, id int64) ([]ChangedDate, error) {
	rows, err := s.query(ctx, `SELECT "object", "column_name", "value" FROM "changed_dates"
		WHERE "stream" = ? AND "backfill_id" = ? ORDER BY "object", "column_name", "value"`, stream, id)
	if err != nil {
		return nil, fmt.Errorf("read changed dates of backfill %d: %w", id, err)
	}
	defer rows.Close()
	var out []ChangedDate
	for rows.Next() {
		d := ChangedDate{Stream: stream, BackfillID: id}
		if err := rows.Scan(&d.Object, &d.Column, &d.Value); err != nil {
			return nil, fmt.Errorf("read changed dates of backfill %d: %w", id, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// LateDate is a value of a date column in a row that a live change
// touched while it was older than its read's late_after, not yet handed to
// proposals.
type LateDate struct {
	ID int64 `json:"id"`
	ChangedDate
	At time.Time `json:"at"` // when it was first recorded
}

// RecordLateDates stores ds (their BackfillID is not kept); a value already
// waiting takes the latest time, so that runs before it count.
func (s *Store) RecordLateDates(ctx context.Context, ds []ChangedDate) error {
	if len(ds) == 0 {
		return nil
	}
	at := s.d.timeArg(now())
	// A stream's write, not the batch engine's: fenced by the stream's
	// lease (WithWriteFence), not the batch engine's.
	err := s.writeTx(ctx, "tx batch_write", func(tx *sql.Tx) error {
		if err := s.checkWriteFence(ctx, tx); err != nil {
			return err
		}
		return s.batchBulkInsert(ctx, tx, `"late_dates"`, `"stream", "object", "column_name", "value", "at"`, 5, changedDatesPerInsert, len(ds),
			func(args []any, i int) []any {
				d := ds[i]
				return append(args, d.Stream, d.Object, d.Column, d.Value, at)
			}, ` ON CONFLICT ("stream", "object", "column_name", "value") DO UPDATE SET "at" = excluded."at"`)
	})
	if err != nil {
		return fmt.Errorf("record late dates of stream %s: %w", ds[0].Stream, err)
	}
	return nil
}

// LateDates returns the late dates waiting, oldest first.
func (s *Store) LateDates(ctx context.Context) ([]LateDate, error) {
	rows, err := s.query(ctx, `SELECT "id", "stream", "object", "column_name", "value", "at" FROM "late_dates" ORDER BY "id"`)
	if err != nil {
		return nil, fmt.Errorf("read late dates: %w", err)
	}
	defer rows.Close()
	var out []LateDate
	for rows.Next() {
		var d LateDate
		var at timeCol
		if err := rows.Scan(&d.ID, &d.Stream, &d.Object, &d.Column, &d.Value, &at); err != nil {
			return nil, fmt.Errorf("read late dates: %w", err)
		}
		d.At = at.T
		out = append(out, d)
	}
	return out, rows.Err()
}
