package stream

import (
	"github.com/tidemark/tidemark/internal/change"
)

// Merge computes a chunk's rows as of the chunk's log position.
//
// rows were read in a snapshot; window holds, in commit order, the changes
// to the same table of the transactions that snapshot did not see and that
// committed before the chunk's position. inRange tells whether a key lies in
// the chunk's key range. Applying the window on top of the snapshot's rows
// gives the range's rows at the position: for any one key, every transaction
// the snapshot saw committed before every one it did not (row locks order
// them), so no later value is overwritten by an earlier one.
//
// conflicts counts window changes that touched the range. unresolved is set
// when a row still carries an Unchanged value no earlier state could fill
// (an unchanged TOASTed column of a row that moved into the range).
func Merge(t *change.Table, rows []change.Row, window []change.Change, inRange func(change.Key) bool) (merged []change.Row, conflicts int, unresolved bool) {
	if len(window) == 0 {
		return rows, 0, false
	}
	state := make(map[string]change.Row, len(rows))
	order := make([]string, 0, len(rows))
	for _, r := range rows {
		k := t.RowKey(r).Encode()
		state[k] = r
		order = append(order, k)
	}
	put := func(k string, r change.Row) {
		if _, ok := state[k]; !ok {
			order = append(order, k)
		}
		state[k] = r
	}
	for _, c := range window {
		switch c.Kind {
		case change.Truncate:
			if len(state) > 0 {
				conflicts++
			}
			clear(state)
		case change.Delete:
			if inRange(c.OldKey) {
				conflicts++
				delete(state, c.OldKey.Encode())
			}
		case change.Insert, change.Update:
			newKey := t.RowKey(c.Row)
			var prior change.Row
			touched := false
			if c.OldKey != nil {
				oldEnc := c.OldKey.Encode()
				prior = state[oldEnc]
				if inRange(c.OldKey) {
					touched = true
					delete(state, oldEnc)
				}
			}
			if inRange(newKey) {
				touched = true
				enc := newKey.Encode()
				if cur, ok := state[enc]; ok && c.OldKey == nil {
					prior = cur
				}
				row, ok := fillUnchanged(c.Row, prior)
				unresolved = unresolved || !ok
				put(enc, row)
			}
			if touched {
				conflicts++
			}
		}
	}
	merged = make([]change.Row, 0, len(state))
	for _, k := range order {
		if r, ok := state[k]; ok {
			merged = append(merged, r)
			delete(state, k) // a key re-added after a delete appears once
		}
	}
	return merged, conflicts, unresolved
}

// fillUnchanged takes the values an update left unchanged from the row's
// previous state. ok is false when some value stays unknown.
func fillUnchanged(row, prior change.Row) (change.Row, bool) {
	out := row
	ok := true
	for i, v := range row {
		if !v.Unchanged {
			continue
		}
		if &out[0] == &row[0] {
			out = append(change.Row(nil), row...)
		}
		if prior != nil && !prior[i].Unchanged {
			out[i] = prior[i]
		} else {
			ok = false
		}
	}
	return out, ok
}
