package mysql

import (
	"context"
	"fmt"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
)

// ExactCountBytes is the size up to which a table's rows are counted rather
// than taken from the server's statistics: counting reads the whole table.
const ExactCountBytes = 64 << 20

// TableSize is what the server says of a table before a backfill reads it.
type TableSize struct {
	Rows  int64
	Bytes int64 // data and indexes, as information_schema.TABLES holds them
	Exact bool  // Rows was counted, not estimated
}

// EstimateTable sizes a table from information_schema.TABLES (InnoDB's
// row estimate), and counts its rows when it is under ExactCountBytes.
func (s *Source) EstimateTable(ctx context.Context, id change.TableID) (TableSize, error) {
	var size TableSize
	err := s.with(ctx, func(c *client.Conn) error {
		r, err := query(c, `SELECT COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0)
			FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, id.Schema, id.Name)
		if err != nil {
			return err
		}
		if r.RowNumber() == 0 {
			return fmt.Errorf("table not found")
		}
		size.Rows, _ = r.GetInt(0, 0)
		size.Bytes, _ = r.GetInt(0, 1)
		if size.Bytes >= ExactCountBytes {
			return nil
		}
		if r, err = query(c, "SELECT COUNT(*) FROM "+quoteTable(id)); err != nil {
			return err
		}
		size.Rows, _ = r.GetInt(0, 0)
		size.Exact = true
		return nil
	})
	if err != nil {
		return TableSize{}, fmt.Errorf("size %s: %w", quoteTable(id), err)
	}
	return size, nil
}

// inRangeBatch is how many keys one InRange query compares.
const inRangeBatch = 200

// InRange reports, for each key, whether the server orders it within
// (low, high] (nil bounds are open), comparing as it compares the key
// columns: their types, character sets and collations (a case-insensitive
// collation puts "B" and "b" at the same place).
func (s *Source) InRange(ctx context.Context, t *change.Table, keys []change.Key, low, high change.Key) ([]bool, error) {
	in := make([]bool, 0, len(keys))
	err := s.with(ctx, func(c *client.Conn) error {
		for start := 0; start < len(keys); start += inRangeBatch {
			batch := keys[start:min(start+inRangeBatch, len(keys))]
			sql, args, err := inRangeQuery(t, batch, low, high)
			if err != nil {
				return err
			}
			r, err := query(c, sql, args...)
			if err != nil {
				return err
			}
			for i := range batch {
				v, _ := r.GetInt(0, i)
				in = append(in, v == 1)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("compare keys of %s with a range: %w", quoteTable(t.ID), err)
	}
	return in, nil
}

func inRangeQuery(t *change.Table, keys []change.Key, low, high change.Key) (string, []any, error) {
	sql := "SELECT "
	var args []any
	for i, k := range keys {
		if i > 0 {
			sql += ", "
		}
		expr := "1"
		for _, b := range []struct {
			bound change.Key
			op    string
		}{{low, ">"}, {high, "<="}} {
			if b.bound == nil {
				continue
			}
			kp, kargs, err := keyParams(t, k)
			if err != nil {
				return "", nil, err
			}
			bp, bargs, err := keyParams(t, b.bound)
			if err != nil {
				return "", nil, err
			}
			expr += " AND " + kp + " " + b.op + " " + bp
			args = append(append(args, kargs...), bargs...)
		}
		sql += "(" + expr + ")"
	}
	return sql, args, nil
}
