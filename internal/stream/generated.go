package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// Stored generated columns (docs/type-mapping.md): the log leaves them out
// of every change (pgoutput before PostgreSQL 18), so a change arrives with
// them Unchanged. A destination that computes a column itself (the
// sinks' Computes) needs nothing. For the other generated columns, the
// applier reads the values from the source for the changed keys, when it
// handles each transaction, before the transaction reaches a batch or a
// chunk's window.
//
// Why this converges although the read gives the row as it is now, which
// may be newer than the change: the read comes after the transaction's
// commit (its snapshot must see the transaction, else it is read again),
// so it never gives an older value. A newer value is one some later
// transaction wrote; that transaction changed the row too, so it comes
// through the log after this one and is read for in turn, and the last
// change of a row is read at or after its commit: the row ends with the
// values of the row's last state. A key no row has any more (deleted or
// moved since) gets NULL; the later delete or update that removed it
// follows in the log. Until then the destination may hold a row whose
// generated values are newer than its other columns, for as long as the
// stream takes to reach the later change.

// generatedSource reads generated columns' values from the source.
type generatedSource interface {
	ReadGenerated(ctx context.Context, t *change.Table, cols []int, keys []change.Key, xid uint32) ([][]change.Value, bool, error)
}

// regenerator fills in the generated columns a destination does not
// compute. It lives in the applier's goroutine.
type regenerator struct {
	src      generatedSource
	computes func(t *change.Table, i int) bool // nil: the destination computes none
	catalog  func(context.Context, change.TableID) (map[int16]source.Attribute, error)
	plans    map[*change.Table]*rereadPlan
	retry    retryPolicy
}

// rereadPlan is what to read for changes of one destination shape: cols
// (indexes into the shape) from query, the shape under the source's
// current column names.
type rereadPlan struct {
	cols  []int
	query *change.Table
}

func newRegenerator(src generatedSource, snk sink.Sink, catalog func(context.Context, change.TableID) (map[int16]source.Attribute, error)) *regenerator {
	r := &regenerator{src: src, catalog: catalog, plans: map[*change.Table]*rereadPlan{},
		retry: retryPolicy{Initial: 5 * time.Millisecond, Max: time.Second}}
	if c, ok := snk.(sink.Computer); ok {
		r.computes = c.Computes
	}
	return r
}

// plan is the re-read plan of a destination shape; nil when nothing is read.
func (r *regenerator) plan(ctx context.Context, t *change.Table) (*rereadPlan, error) {
	if p, ok := r.plans[t]; ok {
		return p, nil
	}
	var cols []int
	for i, c := range t.Columns {
		if c.Generated != "" && (r.computes == nil || !r.computes(t, i)) {
			cols = append(cols, i)
		}
	}
	var p *rereadPlan
	if len(cols) > 0 {
		p = &rereadPlan{cols: cols, query: t}
		if r.catalog != nil {
			// The shape may be older than the catalog (a rename the stream
			// has not reached): the query names the columns as they are.
			attrs, err := r.catalog(ctx, t.ID)
			if err != nil {
				return nil, fmt.Errorf("read the source's columns of %s: %w", t.ID, err)
			}
			q := &change.Table{ID: t.ID, Columns: append([]change.Column(nil), t.Columns...), Key: t.Key}
			for i, c := range q.Columns {
				if a, ok := attrs[c.Num]; ok && c.Num != 0 && !a.Dropped {
					q.Columns[i].Name = a.Name
				}
			}
			p.query = q
		}
	}
	if len(r.plans) > 4096 {
		clear(r.plans)
	}
	r.plans[t] = p
	return p, nil
}

// fill gives the inserts and updates of txn the values of the generated
// columns the destination does not compute, read from the source: one read
// per table of the transaction.
func (r *regenerator) fill(ctx context.Context, txn *change.Txn) error {
	if r == nil {
		return nil
	}
	byTable := map[*change.Table][]int{}
	var order []*change.Table
	for i, c := range txn.Changes {
		if c.Kind != change.Insert && c.Kind != change.Update {
			continue
		}
		p, err := r.plan(ctx, c.Table)
		if err != nil {
			return err
		}
		if p == nil {
			continue
		}
		if _, seen := byTable[c.Table]; !seen {
			order = append(order, c.Table)
		}
		byTable[c.Table] = append(byTable[c.Table], i)
	}
	for _, t := range order {
		if err := r.fillTable(ctx, txn, r.plans[t], byTable[t]); err != nil {
			delete(r.plans, t) // the names may have moved on: ask the catalog again
			return err
		}
	}
	return nil
}

func (r *regenerator) fillTable(ctx context.Context, txn *change.Txn, p *rereadPlan, idx []int) error {
	keys := make([]change.Key, len(idx))
	for j, i := range idx {
		c := txn.Changes[i]
		keys[j] = c.Table.RowKey(c.Row)
	}
	vals, err := r.read(ctx, p, keys, txn.Xid)
	if err != nil {
		return err
	}
	for j, i := range idx {
		c := &txn.Changes[i]
		row := append(change.Row(nil), c.Row...)
		for n, col := range p.cols {
			if !row[col].Unchanged {
				continue // the log carried it
			}
			if vals[j] == nil {
				row[col] = change.Null // the row is gone: a later change says so
			} else {
				row[col] = vals[j][n]
			}
		}
		c.Row = row
	}
	return nil
}

// read asks the source until its snapshot sees the transaction.
func (r *regenerator) read(ctx context.Context, p *rereadPlan, keys []change.Key, xid uint32) ([][]change.Value, error) {
	delay := r.retry.Initial
	for {
		vals, visible, err := r.src.ReadGenerated(ctx, p.query, p.cols, keys, xid)
		if err != nil {
			return nil, err
		}
		if visible {
			return vals, nil
		}
		if !sleep(ctx, delay) {
			return nil, ctx.Err()
		}
		delay = r.retry.next(delay)
	}
}
