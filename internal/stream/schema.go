package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/genexpr"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
)

// Schema changes in the applier (see docs/schema-changes.md).
//
// Every change and every chunk carries the shape of its table as the
// source had it: the relation message the change came with, or the
// snapshot the chunk was read in. The applier keeps the shape of each
// destination table and compares: a newer shape (an added or renamed
// column, a widened type) is applied to the destination first, at that
// point of the stream; a change of an older shape (logged before a schema
// change the destination has already followed) is translated into the
// destination's shape by attribute number; a dropped column or a type the
// destination cannot follow stops the table. Nothing of a stopped table is
// written until a backfill of it is initiated.

// schemaState is the applier's view of the destination tables' shapes.
type schemaState struct {
	stream string
	// dest is each destination table's shape, as the batches handed to the
	// writer leave it; a table not in it starts from initial.
	dest    map[change.TableID]*change.Table
	initial func(change.TableID) *change.Table
	// stopped lists the tables whose changes are dropped, and why.
	stopped map[change.TableID]string
	// trans caches, by the table a change came with, its translation.
	trans map[*change.Table]*translation
	ddl   ddlSink // nil: the destination cannot follow schema changes
	// tableless is set for a destination that holds no tables (a log,
	// files): each change goes out in the shape it was logged in, and
	// judged holds the shapes already compared with the table's.
	tableless bool
	judged    map[*change.Table]bool
	catalog   func(context.Context, change.TableID) (map[int16]source.Attribute, error)
	hooks     schemaHooks
	retry     retryPolicy
}

// ddlSink is what the applier asks of the destination for schema changes,
// always while the writer is idle.
type ddlSink interface {
	EnsureTable(ctx context.Context, t *change.Table) error
	sink.Alterer
}

// schemaHooks tell the stream what the applier decided. They are called
// from the applier's goroutine and must not block.
type schemaHooks struct {
	// shaped: the destination table now has shape t.
	shaped func(id change.TableID, t *change.Table)
	// stopped: the table is not streamed any more, for the reason.
	stopped func(id change.TableID, reason string)
	// refill: the rows already in the destination lack values an added
	// column has on the source; a backfill brings them.
	refill func(id change.TableID)
}

func newSchemaState(stream string, initial func(change.TableID) *change.Table) *schemaState {
	return &schemaState{stream: stream, initial: initial, dest: map[change.TableID]*change.Table{},
		stopped: map[change.TableID]string{}, trans: map[*change.Table]*translation{}, judged: map[*change.Table]bool{},
		retry: retryPolicy{Initial: time.Second, Max: time.Minute}}
}

// translation maps rows of one shape of a table onto another.
type translation struct {
	to       *change.Table
	idx      []int // per column of to: its index in the source shape, -1 if absent
	identity bool
}

func newTranslation(from, to *change.Table) *translation {
	tr := &translation{to: to, idx: make([]int, len(to.Columns)), identity: len(from.Columns) == len(to.Columns)}
	for i, c := range to.Columns {
		tr.idx[i] = matchColumn(from, c)
		if tr.idx[i] != i {
			tr.identity = false
		}
	}
	return tr
}

// row translates a row; a column the source shape lacks is Unchanged, so
// sinks keep the destination's value (or its default, for a new row).
func (tr *translation) row(r change.Row) change.Row {
	if tr.identity || r == nil {
		return r
	}
	out := make(change.Row, len(tr.idx))
	for i, j := range tr.idx {
		if j < 0 {
			out[i] = change.Value{Unchanged: true}
		} else {
			out[i] = r[j]
		}
	}
	return out
}

func (tr *translation) change(c change.Change) change.Change {
	c.Row = tr.row(c.Row)
	c.Table = tr.to
	return c
}

// matchColumn finds c in t by attribute number, by name when either has
// none.
func matchColumn(t *change.Table, c change.Column) int {
	if c.Num != 0 {
		if i := t.ColumnByNum(c.Num); i >= 0 || hasNums(t) {
			return i
		}
	}
	return t.ColumnIndex(c.Name)
}

func hasNums(t *change.Table) bool {
	return len(t.Columns) > 0 && t.Columns[0].Num != 0
}

// destOf is the destination shape of a table.
func (s *schemaState) destOf(id change.TableID) *change.Table {
	if d := s.dest[id]; d != nil {
		return d
	}
	if s.initial != nil {
		if d := s.initial(id); d != nil {
			s.dest[id] = d
			return d
		}
	}
	return nil
}

// conformTxn brings the destination forward to every new shape the
// transaction's changes carry, then translates each change into the
// destination's shape; changes of stopped tables are dropped.
func (a *applier) conformTxn(ctx context.Context, txn *change.Txn) error {
	if a.schema == nil {
		return nil
	}
	for _, c := range txn.Changes {
		if _, err := a.reshape(ctx, c.Table); err != nil {
			return err
		}
	}
	kept := txn.Changes[:0]
	for _, c := range txn.Changes {
		if tr := a.translationOf(c.Table); tr != nil {
			kept = append(kept, tr.change(c))
		}
	}
	txn.Changes = kept
	return nil
}

// translationOf is the cached translation of a change's table into its
// destination shape; nil when the table is stopped.
func (a *applier) translationOf(t *change.Table) *translation {
	s := a.schema
	if _, stopped := s.stopped[t.ID]; stopped {
		return nil
	}
	d := s.destOf(t.ID)
	if d == nil || s.tableless {
		return &translation{to: t, identity: true}
	}
	if tr := s.trans[t]; tr != nil && tr.to == d {
		return tr
	}
	if len(s.trans) > 4096 {
		clear(s.trans)
	}
	tr := newTranslation(t, d)
	s.trans[t] = tr
	return tr
}

// reshape makes the destination follow the shape in, if it is newer than
// the destination's. It returns the destination's shape, nil when the
// table is stopped (now or before).
func (a *applier) reshape(ctx context.Context, in *change.Table) (*change.Table, error) {
	s := a.schema
	if _, stopped := s.stopped[in.ID]; stopped {
		return nil, nil
	}
	d := s.destOf(in.ID)
	if d == nil {
		s.dest[in.ID] = in
		return in, nil
	}
	if d == in || change.SameShape(d, in) {
		return d, nil
	}
	if s.tableless {
		return a.followInEvents(ctx, d, in)
	}
	if tr := s.trans[in]; tr != nil && tr.to == d {
		return d, nil // judged before: an older shape
	}
	var attrs map[int16]source.Attribute
	if s.catalog != nil {
		var err error
		if attrs, err = s.catalog(ctx, in.ID); err != nil {
			return nil, fmt.Errorf("read the source's columns of %s: %w", in.ID, err)
		}
	}
	p := planShape(d, in, attrs)
	if p.fail != "" {
		a.stopTable(in.ID, schemaReason(s.stream, in.ID, p.fail))
		return nil, nil
	}
	if len(p.steps) > 0 {
		if err := a.alterDest(ctx, p.dest, p.steps); err != nil {
			var refused *schemaRefusal
			if errors.As(err, &refused) {
				a.stopTable(in.ID, schemaReason(s.stream, in.ID, refused.Error()))
				return nil, nil
			}
			return nil, err
		}
		if change.SameShape(p.dest, in) {
			p.dest = in // the same shape: later changes of in take the fast path
		}
		s.dest[in.ID] = p.dest
		a.log.Info("destination table follows a schema change", logkey.Object(in.ID.String()), "steps", describeSteps(p.steps))
		if s.hooks.shaped != nil {
			s.hooks.shaped(in.ID, p.dest)
		}
	}
	if p.refill && s.hooks.refill != nil {
		s.hooks.refill(in.ID)
	}
	return s.dest[in.ID], nil
}

// followInEvents is reshape for a destination that holds no tables (a
// log, files): there is nothing to alter, and every change goes out in the
// shape it was logged in, so a consumer sees columns come and go as the
// source's log does. A newer shape becomes the table's (the shape chunks
// are merged in and verify reads with); an added column whose values in
// older rows the log lacks asks for a refill, which re-sends the table.
func (a *applier) followInEvents(ctx context.Context, d, in *change.Table) (*change.Table, error) {
	s := a.schema
	if s.judged[in] {
		return in, nil
	}
	var attrs map[int16]source.Attribute
	if s.catalog != nil {
		var err error
		if attrs, err = s.catalog(ctx, in.ID); err != nil {
			return nil, fmt.Errorf("read the source's columns of %s: %w", in.ID, err)
		}
	}
	if p := planShape(d, in, attrs); p.fail != "" || len(p.steps) > 0 { // in is the newer
		s.dest[in.ID] = in
		a.log.Info("events carry a new shape of the table", logkey.Object(in.ID.String()), "change", cmp.Or(p.fail, describeSteps(p.steps)))
		if s.hooks.shaped != nil {
			s.hooks.shaped(in.ID, in)
		}
		if p.refill && s.hooks.refill != nil {
			s.hooks.refill(in.ID)
		}
	}
	if len(s.judged) > 4096 {
		clear(s.judged)
	}
	s.judged[in] = true
	return in, nil
}

// schemaRefusal is a schema change the destination refused.
type schemaRefusal struct{ err error }

func (e *schemaRefusal) Error() string {
	return "the destination could not follow it: " + e.err.Error()
}

// alterDest runs the steps on the destination once everything before them
// is committed. Failures other than a refusal are retried, as the writer
// retries batches.
func (a *applier) alterDest(ctx context.Context, t *change.Table, steps []sink.AlterStep) error {
	if a.schema.ddl == nil {
		return &schemaRefusal{errors.New("it cannot change its tables")}
	}
	if err := a.flushAndWait(ctx); err != nil {
		return err
	}
	delay := a.schema.retry.Initial
	for {
		err := a.schema.ddl.AlterTable(ctx, t, steps)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, sink.ErrRejected):
			return &schemaRefusal{err}
		}
		a.log.Warn("altering a destination table failed; retrying", logkey.Object(t.ID.String()), "retry_in", delay, logkey.Err(err))
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
		delay = a.schema.retry.next(delay)
	}
}

// stopTable drops the table's changes from now on and tells the stream.
func (a *applier) stopTable(id change.TableID, reason string) {
	s := a.schema
	s.stopped[id] = reason
	delete(s.dest, id)
	a.log.Error("object not streamed any more", logkey.Object(id.String()), "reason", reason)
	if s.hooks.stopped != nil {
		s.hooks.stopped(id, reason)
	}
}

// conformChunk brings the destination forward to the shape the chunk was
// read in, and translates the chunk's rows and its window's changes into
// the destination's shape. It returns that shape, nil when the table is
// stopped. Chunks without a shape of their own (tests) keep pc.table.
func (a *applier) conformChunk(ctx context.Context, pc *pendingChunk) (*change.Table, error) {
	if a.schema == nil || pc.read.Table == nil {
		return pc.table, nil
	}
	d, err := a.reshape(ctx, pc.read.Table)
	if err != nil || d == nil {
		return nil, err
	}
	if d != pc.read.Table {
		tr := newTranslation(pc.read.Table, d)
		if !tr.identity {
			rows := make([]change.Row, len(pc.read.Rows))
			for i, r := range pc.read.Rows {
				rows[i] = tr.row(r)
			}
			pc.read.Rows = rows
		}
	}
	for i := range pc.window {
		for j, c := range pc.window[i].changes {
			if c.Table == d {
				continue
			}
			// Cached when d is the destination's shape; a destination
			// without tables merges in the chunk's own shape.
			tr := a.translationOf(c.Table)
			if tr.to != d {
				tr = newTranslation(c.Table, d)
			}
			pc.window[i].changes[j] = tr.change(c)
		}
	}
	return d, nil
}

// shapePlan is what following a new shape takes.
type shapePlan struct {
	dest   *change.Table // the destination's shape after the steps
	steps  []sink.AlterStep
	fail   string // why the table cannot be followed; "" when it can
	refill bool   // an added column's values in older rows are unknown
}

// planShape compares the destination's shape d with a shape in of the same
// table and decides, column by column, with the catalog's attributes now
// (nil when unknown) to tell which of the two is newer:
//   - a column of d that in lacks: if the catalog has it alive, in is older
//     (or the column is generated, which the log leaves out); else it was
//     dropped, and the table stops;
//   - a name or type that differs: if the catalog agrees with d, in is
//     older; else it is a rename, or a type change, which must widen
//     (change.Widens) — a narrowing or a change to another type stops the
//     table;
//   - a column of in that d lacks is added, with the value older rows hold
//     when the catalog has it; a default it cannot tell asks for a refill.
func planShape(d, in *change.Table, attrs map[int16]source.Attribute) shapePlan {
	next := &change.Table{ID: d.ID, Columns: slices.Clone(d.Columns), Key: slices.Clone(d.Key)}
	var p shapePlan
	seen := make([]bool, len(in.Columns))
	for i, dc := range d.Columns {
		a, known := attrs[dc.Num]
		known = known && dc.Num != 0
		alive := known && !a.Dropped
		j := matchColumn(in, dc)
		if j < 0 {
			if alive || attrs == nil || (!known && dc.Num == 0) {
				continue // in is older, or the log leaves the column out
			}
			p.fail = fmt.Sprintf("column %q was dropped on the source", dc.Name)
			return p
		}
		seen[j] = true
		mc, col := in.Columns[j], dc
		if mc.Name != dc.Name && !(alive && a.Name == dc.Name) {
			if k := next.ColumnIndex(mc.Name); k >= 0 && k != i {
				p.fail = fmt.Sprintf("column %q was renamed to %q on the source, a name the destination table has for another column", dc.Name, mc.Name)
				return p
			}
			col.Name = mc.Name
			p.steps = append(p.steps, sink.AlterStep{Kind: sink.RenameColumn, Column: col, Prev: dc})
		}
		if !change.SameType(mc, dc) && !(alive && change.SameType(a.Column, dc)) {
			forward := !alive || change.SameType(a.Column, mc)
			switch {
			case change.Widens(dc, mc):
				typed := mc
				typed.Name, typed.Num = col.Name, dc.Num
				p.steps = append(p.steps, sink.AlterStep{Kind: sink.SetType, Column: typed, Prev: col})
				col = typed
			case change.Widens(mc, dc) && !forward:
				// in is older: the catalog moved on past it
			default:
				p.fail = fmt.Sprintf("column %q changed type from %s to %s on the source, which is not a widening the destination can follow without losing or changing values", dc.Name, dc.Type, mc.Type)
				return p
			}
		}
		next.Columns[i] = col
	}
	for j, mc := range in.Columns {
		if seen[j] || (mc.Num == 0 && hasNums(d)) {
			continue // matched, or a column align could not number: left out
		}
		step := sink.AlterStep{Kind: sink.AddColumn, Column: mc}
		if a, known := attrs[mc.Num]; known && mc.Num != 0 {
			switch {
			case a.Missing != nil:
				step.Default = a.Missing
			case a.HasDefault:
				p.refill = true
			}
		}
		p.steps = append(p.steps, step)
		next.Columns = append(next.Columns, mc)
	}
	p.dest = d
	if len(p.steps) > 0 {
		renameInGenerated(next, p.steps)
		p.dest = next
	}
	return p
}

// renameInGenerated makes the expressions of t's generated columns read
// the renamed columns under their new names, as the source's catalog (and
// a destination computing them) does.
func renameInGenerated(t *change.Table, steps []sink.AlterStep) {
	for _, st := range steps {
		if st.Kind != sink.RenameColumn {
			continue
		}
		for i, c := range t.Columns {
			if c.Generated != "" {
				t.Columns[i].Generated = genexpr.RenameColumn(c.Generated, st.Prev.Name, st.Column.Name)
			}
		}
	}
}

// schemaReasonPrefix starts the reason of every object a schema change
// stopped: such an object stays failed, also across restarts, until a
// backfill of it is initiated.
const schemaReasonPrefix = "schema change: "

func schemaReason(stream string, id change.TableID, what string) string {
	return fmt.Sprintf("%s%s: %s; the table is not streamed any more. Make the destination table match the source (see docs/schema-changes.md), then run `tidemark backfill initiate %s %s`",
		schemaReasonPrefix, id, what, stream, id)
}

func isSchemaFailure(status, reason string) bool {
	return status == StatusFailed && strings.HasPrefix(reason, schemaReasonPrefix)
}

func describeSteps(steps []sink.AlterStep) string {
	parts := make([]string, len(steps))
	for i, st := range steps {
		switch st.Kind {
		case sink.RenameColumn:
			parts[i] = fmt.Sprintf("rename column %q to %q", st.Prev.Name, st.Column.Name)
		case sink.SetType:
			parts[i] = fmt.Sprintf("column %q to type %s", st.Column.Name, st.Column.Type)
		default:
			parts[i] = fmt.Sprintf("add column %q %s", st.Column.Name, st.Column.Type)
		}
	}
	return strings.Join(parts, ", ")
}
