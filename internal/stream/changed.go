package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/lineage"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/store"
)

// recordChanged arranges for the date values of the rows b's chunks change
// to be stored before the destination commits them, so that a crash after
// the commit loses none (docs/lineage.md). A destination that reports
// changes calls it back before its commit, with what each chunk changed; for
// another, every row a chunk writes counts, and the values are stored now,
// before Apply.
func (w *writer) recordChanged(ctx context.Context, b *outBatch) error {
	if w.record == nil || !tracked(&b.Batch) {
		return nil
	}
	save := func(ctx context.Context) error {
		if err := w.record(ctx, changedDates(&b.Batch)); err != nil {
			return err
		}
		if w.recordLate == nil {
			return nil
		}
		return w.recordLate(ctx, w.lateDates(&b.Batch, time.Now()))
	}
	if _, ok := w.sink.(sink.ChangeReporter); ok {
		b.Batch.BeforeCommit = save
		return nil
	}
	for _, op := range b.Ops {
		switch {
		case op.Chunk != nil && op.Chunk.Changed != nil:
			for _, r := range op.Chunk.Rows {
				op.Chunk.Changed.Note(op.Chunk.Table, r)
			}
		case op.Change != nil && op.Changed != nil && op.Change.Kind != change.Delete:
			op.Changed.Note(op.Change.Table, op.Change.Row) // the new row only: the old one is the destination's
		}
	}
	return save(ctx)
}

func tracked(b *sink.Batch) bool {
	for _, op := range b.Ops {
		if op.Chunk != nil && op.Chunk.Changed != nil || op.Changed != nil {
			return true
		}
	}
	return false
}

// lateColumns names the columns of late rules.
func lateColumns(rules []config.LateRule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Column
	}
	return out
}

// lateDates lists the values b's live changes noted that are late at now
// by their column's rule, each as lineage.Mark keeps it.
func (w *writer) lateDates(b *sink.Batch, now time.Time) []store.ChangedDate {
	var out []store.ChangedDate
	seen := map[store.ChangedDate]bool{}
	for _, op := range b.Ops {
		if op.Change == nil || op.Changed == nil {
			continue
		}
		t := op.Change.Table
		object := config.FormatTable(t.ID)
		for _, rule := range w.late[t.ID] {
			i := t.ColumnIndex(rule.Column)
			if i < 0 {
				continue
			}
			tag := change.TagOf(t.Columns[i])
			for v := range op.Changed.Values[rule.Column] {
				if !lineage.Late(tag, v, rule.Location, rule.After, now) {
					continue
				}
				d := store.ChangedDate{Stream: b.Stream, Object: object, Column: rule.Column, Value: lineage.Mark(tag, v)}
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// changedDates lists what b's chunks noted, each value as lineage.Mark
// keeps it.
func changedDates(b *sink.Batch) []store.ChangedDate {
	var out []store.ChangedDate
	seen := map[store.ChangedDate]bool{}
	for _, op := range b.Ops {
		ch := op.Chunk
		if ch == nil || ch.Changed == nil {
			continue
		}
		object := config.FormatTable(ch.Table.ID)
		for col, values := range ch.Changed.Values {
			tag := change.TagOther
			if i := ch.Table.ColumnIndex(col); i >= 0 {
				tag = change.TagOf(ch.Table.Columns[i])
			}
			for v := range values {
				d := store.ChangedDate{Stream: b.Stream, BackfillID: ch.BackfillID, Object: object, Column: col, Value: lineage.Mark(tag, v)}
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// errRecordChanged wraps a failure to store changed dates.
func errRecordChanged(err error) error {
	return fmt.Errorf("record the dates the batch changes: %w", err)
}
