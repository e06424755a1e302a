package pg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgsum"
	"github.com/tidemark/tidemark/internal/source"
)

// SumKind names the checksum SumRange computes.
func (s *Source) SumKind() string { return pgsum.Kind }

// SumRange counts and checksums up to Limit rows with key in (After, Upto]
// in one snapshot, as ReadChunk would read them, without sending them: the
// range's last key is found first (an index scan over the keys alone), then
// the server sums the rows up to it.
func (s *Source) SumRange(ctx context.Context, t *change.Table, opt ReadOptions) (Chunk, error) {
	if opt.Filter != nil || opt.Columns != nil {
		return Chunk{}, errors.New("sum range: a filter or a column subset is compared row by row")
	}
	dc, err := s.defaultCollation(ctx)
	if err != nil {
		return Chunk{}, err
	}
	return s.inSnapshot(ctx, "sum range of "+t.ID.String(), func(tx *readTx) (Chunk, error) {
		return sumRange(ctx, tx, t, dc, opt)
	})
}

func sumRange(ctx context.Context, tx *readTx, t *change.Table, dc defaultCollation, opt ReadOptions) (Chunk, error) {
	chunk, err := openChunk(ctx, tx, t, dc)
	if err != nil {
		return Chunk{}, err
	}
	t = chunk.Table
	sum := &source.RangeSum{}
	upto := opt.Upto
	if opt.Limit > 0 {
		if sum.Last, err = lastKeyOf(ctx, tx, t, opt); err != nil {
			return Chunk{}, err
		}
		if sum.Last != nil {
			upto = sum.Last
		}
	}
	cols := make([]pgsum.Column, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = pgsum.Column{Ref: quoteIdent(c.Name), BaseOID: c.BaseOID}
	}
	where, params := rangeWhere(t, opt.After, upto)
	res := tx.pgConn().ExecParams(ctx, pgsum.Query(cols, "FROM "+quoteTable(t.ID)+where), params, nil, nil, nil).Read()
	if res.Err != nil {
		return Chunk{}, res.Err
	}
	if sum.Rows, err = strconv.Atoi(string(res.Rows[0][0])); err != nil {
		return Chunk{}, fmt.Errorf("row count %q: %w", res.Rows[0][0], err)
	}
	sum.Sum = string(res.Rows[0][1])
	chunk.Sum = sum
	return chunk, nil
}

// lastKeyOf is the key of the Limit-th row after opt.After (up to
// opt.Upto), nil when the range holds fewer rows.
func lastKeyOf(ctx context.Context, tx *readTx, t *change.Table, opt ReadOptions) (change.Key, error) {
	keys := strings.TrimSuffix(strings.TrimPrefix(keyTuple(t), "("), ")")
	where, params := rangeWhere(t, opt.After, opt.Upto)
	sql := "SELECT " + keys + " FROM " + quoteTable(t.ID) + where + " ORDER BY " + keys + " OFFSET " + strconv.Itoa(opt.Limit-1) + " LIMIT 1"
	res := tx.pgConn().ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	if len(res.Rows) == 0 {
		return nil, nil
	}
	key := make(change.Key, len(res.Rows[0]))
	for i, v := range res.Rows[0] {
		if v == nil {
			key[i] = change.Null
		} else {
			key[i] = change.Text(string(v))
		}
	}
	return key, nil
}

// rangeWhere is the condition "key in (after, upto]" (nil bounds are
// open) with its parameters, or "" when both are open.
func rangeWhere(t *change.Table, after, upto change.Key) (string, [][]byte) {
	conds, params := rangeConds(t, after, upto, 1)
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), params
}

// rangeConds are the conditions of "key in (after, upto]", their
// parameters numbered from $from on.
func rangeConds(t *change.Table, after, upto change.Key, from int) ([]string, [][]byte) {
	keyList := keyTuple(t)
	var conds []string
	var params [][]byte
	if after != nil {
		conds = append(conds, keyList+" > "+placeholders(from, len(t.Key)))
		params = append(params, keyParams(after)...)
	}
	if upto != nil {
		conds = append(conds, keyList+" <= "+placeholders(from+len(params), len(t.Key)))
		params = append(params, keyParams(upto)...)
	}
	return conds, params
}
