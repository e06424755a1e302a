package pg

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// ReadGenerated reads, for each key, the values of the columns cols (indexes
// into t's columns) of the row with that key, as they are now: the values
// of stored generated columns, which the log leaves out of every change
// (see docs/type-mapping.md). vals[i] is nil for a key no row has. The
// read's snapshot must see transaction xid, the change the values are
// read for: visible is false when it did not yet (its commit is in the log
// but not visible to new snapshots for a moment, as while it waits for a
// synchronous standby), and the caller reads again.
func (s *Source) ReadGenerated(ctx context.Context, t *change.Table, cols []int, keys []change.Key, xid uint32) (vals [][]change.Value, visible bool, err error) {
	err = s.readAt(ctx, repeatableRead, func(tx *readTx) error {
		vals, visible, err = readGenerated(ctx, tx, t, cols, keys, xid)
		return err
	})
	if err != nil {
		return nil, false, classify(fmt.Errorf("read generated columns of %s: %w", t.ID, err))
	}
	return vals, visible, nil
}

func readGenerated(ctx context.Context, tx *readTx, t *change.Table, cols []int, keys []change.Key, xid uint32) ([][]change.Value, bool, error) {
	pc := tx.pgConn()
	res := pc.ExecParams(ctx, "SELECT pg_current_snapshot()::text", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, false, res.Err
	}
	snap, err := ParseSnapshot(string(res.Rows[0][0]))
	if err != nil {
		return nil, false, err
	}
	if !snap.VisibleXid(xid) {
		return nil, false, nil
	}
	sql, params := generatedQuery(t, cols, keys)
	rr := pc.ExecParams(ctx, sql, params, nil, nil, nil)
	vals := make([][]change.Value, len(keys))
	for rr.NextRow() {
		raw := rr.Values()
		ord, err := strconv.Atoi(string(raw[0]))
		if err != nil || ord < 1 || ord > len(keys) {
			rr.Close()
			return nil, false, fmt.Errorf("row number %q", raw[0])
		}
		row := make([]change.Value, len(cols))
		for i, v := range raw[1:] {
			if v == nil {
				row[i] = change.Null
			} else {
				row[i] = change.Text(string(v))
			}
		}
		vals[ord-1] = row
	}
	if _, err := rr.Close(); err != nil {
		return nil, false, err
	}
	return vals, true, nil
}

// generatedQuery selects the cols of the rows with the keys, numbered by
// the key's position (from 1). The keys travel as text arrays, one per key
// column, cast to the columns' types.
func generatedQuery(t *change.Table, cols []int, keys []change.Key) (string, [][]byte) {
	kc := t.KeyColumns()
	names := make([]string, len(kc))
	match := make([]string, len(kc))
	arrays := make([]string, len(kc))
	params := make([][]byte, len(kc))
	for i, c := range kc {
		names[i] = "k" + strconv.Itoa(i)
		match[i] = "t." + quoteIdent(c.Name) + " = " + typedExpr("u."+names[i], c)
		arrays[i] = "$" + strconv.Itoa(i+1) + "::text[]"
		params[i] = textArray(keys, i)
	}
	sel := make([]string, len(cols))
	for i, j := range cols {
		sel[i] = "t." + quoteIdent(t.Columns[j].Name)
	}
	return fmt.Sprintf("SELECT u.ord, %s FROM unnest(%s) WITH ORDINALITY AS u(%s, ord) JOIN %s AS t ON %s",
		strings.Join(sel, ", "), strings.Join(arrays, ", "), strings.Join(names, ", "), quoteTable(t.ID),
		strings.Join(match, " AND ")), params
}

// textArray renders the i-th values of the keys as a text[] literal.
func textArray(keys []change.Key, i int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for j, k := range keys {
		if j > 0 {
			b.WriteByte(',')
		}
		if k[i].Null {
			b.WriteString("NULL")
			continue
		}
		b.WriteByte('"')
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k[i].Text))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return []byte(b.String())
}
