package stream

import "github.com/tidemark/tidemark/internal/store"

// LoadedBy names, for an object whose latest backfill was stopped, the
// earlier backfill whose load of the whole table still stands: the newest
// completed and loaded one of every row and column, with only backfills a
// person initiated after it. Those write the source's rows as they are, so
// stopping one leaves the destination whole; one that failed, or that
// tidemark started (a reset, a schema change, a discovery, a repair), says
// the destination lacked something since. history is the object's backfills,
// newest first; 0 when none qualifies.
func LoadedBy(history []store.Backfill) int64 {
	if len(history) == 0 || history[0].Status != StatusStopped {
		return 0
	}
	for _, b := range history {
		switch {
		case b.Status == StatusCompleted && b.LoadedAt != nil && optionsOf(b).wholeTable():
			return b.ID
		case startedByTidemark[b.StartedBy] || b.Status == StatusFailed:
			return 0
		}
	}
	return 0
}

// wholeTable tells options that read every row and column of a table.
func (o BackfillOptions) wholeTable() bool {
	return o.SampleRows == 0 && o.Filter == "" && len(o.Columns) == 0 && o.ranges == nil
}

// startedByTidemark names the backfills tidemark starts itself, each
// because the destination lacks rows or values.
var startedByTidemark = map[string]bool{store.StartedByAutomatic: true, StartedByDiscovery: true,
	StartedByReset: true, StartedBySchemaChange: true, StartedByRepair: true}
