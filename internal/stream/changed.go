package stream

import (
	"context"
	"fmt"

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
	if _, ok := w.sink.(sink.ChangeReporter); ok {
		b.Batch.BeforeCommit = func(ctx context.Context) error { return w.record(ctx, changedDates(&b.Batch)) }
		return nil
	}
	for _, op := range b.Ops {
		if ch := op.Chunk; ch != nil && ch.Changed != nil {
			for _, r := range ch.Rows {
				ch.Changed.Note(ch.Table, r)
			}
		}
	}
	return w.record(ctx, changedDates(&b.Batch))
}

func tracked(b *sink.Batch) bool {
	for _, op := range b.Ops {
		if op.Chunk != nil && op.Chunk.Changed != nil {
			return true
		}
	}
	return false
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
