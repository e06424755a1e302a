package pg

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// Type oids whose order tidemark reproduces in Go.
const (
	oidInt2    = 21
	oidInt4    = 23
	oidInt8    = 20
	oidOID     = 26
	oidText    = 25
	oidVarchar = 1043
	oidUUID    = 2950
)

// KeyCompare returns a Go comparison of two keys of t that matches the
// source's ORDER BY, or nil when some key column's order (a collation other
// than C, a numeric, a date…) is only known to the server; InRange then asks
// the server.
func KeyCompare(t *change.Table) func(a, b change.Key) int {
	kinds := make([]byte, len(t.Key))
	for i, c := range t.KeyColumns() {
		switch c.BaseOID {
		case oidInt2, oidInt4, oidInt8, oidOID:
			kinds[i] = 'i'
		case oidText, oidVarchar:
			if !c.ByteOrder {
				return nil
			}
			kinds[i] = 's'
		case oidUUID:
			kinds[i] = 's' // canonical lower-case text sorts like the bytes
		default:
			return nil
		}
	}
	return func(a, b change.Key) int {
		for i, k := range kinds {
			var c int
			if k == 'i' {
				x, _ := strconv.ParseInt(a[i].Text, 10, 64)
				y, _ := strconv.ParseInt(b[i].Text, 10, 64)
				c = cmpInt(x, y)
			} else {
				c = strings.Compare(a[i].Text, b[i].Text)
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
}

var _ source.KeyOrderer = (*Source)(nil)

// KeyCompare implements source.KeyOrderer with the package's KeyCompare.
func (s *Source) KeyCompare(t *change.Table) func(a, b change.Key) int { return KeyCompare(t) }

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// InRange reports for each key whether it lies in (low, high] in the
// source's key order; nil bounds are open. It compares in Go when it can and
// otherwise asks the server, which applies the columns' own types and
// collations.
func (s *Source) InRange(ctx context.Context, t *change.Table, keys []change.Key, low, high change.Key) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if cmp := KeyCompare(t); cmp != nil {
		for i, k := range keys {
			out[i] = (low == nil || cmp(k, low) > 0) && (high == nil || cmp(k, high) <= 0)
		}
		return out, nil
	}
	if low == nil && high == nil {
		for i := range out {
			out[i] = true
		}
		return out, nil
	}
	sql, args := inRangeQuery(t, keys, low, high)
	err := s.read(ctx, func(q queryer) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ord int64
			var in bool
			if err := rows.Scan(&ord, &in); err != nil {
				return err
			}
			out[ord-1] = in
		}
		return rows.Err()
	})
	if err != nil {
		return nil, classify(fmt.Errorf("compare keys of %s: %w", t.ID, err))
	}
	return out, nil
}

func inRangeQuery(t *change.Table, keys []change.Key, low, high change.Key) (string, []any) {
	cols := t.KeyColumns()
	var args []any
	names := make([]string, len(cols))
	typed := make([]string, len(cols))
	arrays := make([]string, len(cols))
	for i, c := range cols {
		names[i] = "k" + strconv.Itoa(i)
		typed[i] = typedExpr("u."+names[i], c)
		vals := make([]string, len(keys))
		for j, k := range keys {
			vals[j] = k[i].Text
		}
		args = append(args, vals)
		arrays[i] = "$" + strconv.Itoa(len(args)) + "::text[]"
	}
	bound := func(k change.Key) string {
		exprs := make([]string, len(cols))
		for i, c := range cols {
			args = append(args, k[i].Text)
			exprs[i] = typedExpr("$"+strconv.Itoa(len(args))+"::text", c)
		}
		return "(" + strings.Join(exprs, ", ") + ")"
	}
	key := "(" + strings.Join(typed, ", ") + ")"
	var conds []string
	if low != nil {
		conds = append(conds, key+" > "+bound(low))
	}
	if high != nil {
		conds = append(conds, key+" <= "+bound(high))
	}
	return fmt.Sprintf("SELECT u.ord, %s FROM unnest(%s) WITH ORDINALITY AS u(%s, ord)",
		strings.Join(conds, " AND "), strings.Join(arrays, ", "), strings.Join(names, ", ")), args
}

// typedExpr casts a text expression to the column's type and collation.
// The type name comes from the catalog's format_type, which quotes it.
func typedExpr(expr string, c change.Column) string {
	e := "(" + expr + ")::" + c.Type
	if c.Collation != "" && c.Collation != "default" {
		e += " COLLATE " + quoteIdent(c.Collation)
	}
	return e
}
