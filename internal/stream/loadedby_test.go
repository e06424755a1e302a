package stream

import (
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

func TestLoadedBy(t *testing.T) {
	at := time.Now()
	loaded := func(id int64, startedBy string, opts map[string]any) store.Backfill {
		return store.Backfill{ID: id, Status: StatusCompleted, LoadedAt: &at, StartedBy: startedBy, Options: opts}
	}
	ended := func(id int64, status, startedBy string) store.Backfill {
		return store.Backfill{ID: id, Status: status, StartedBy: startedBy}
	}
	for name, c := range map[string]struct {
		history []store.Backfill
		want    int64
	}{
		"stopped after a load":           {[]store.Backfill{ended(4, StatusStopped, "cli"), loaded(3, "cli", nil)}, 3},
		"stopped twice after a load":     {[]store.Backfill{ended(5, StatusStopped, "api"), ended(4, StatusStopped, "cli:ann"), loaded(3, store.StartedByAutomatic, nil)}, 3},
		"latest completed":               {[]store.Backfill{loaded(4, "cli", nil), loaded(3, "cli", nil)}, 0},
		"latest failed":                  {[]store.Backfill{ended(4, StatusFailed, "cli"), loaded(3, "cli", nil)}, 0},
		"never loaded":                   {[]store.Backfill{ended(4, StatusStopped, "cli"), ended(3, StatusCompleted, "cli")}, 0},
		"a sample loaded":                {[]store.Backfill{ended(4, StatusStopped, "cli"), loaded(3, "cli", map[string]any{optSampleRows: float64(10)})}, 0},
		"a filter loaded":                {[]store.Backfill{ended(4, StatusStopped, "cli"), loaded(3, "cli", map[string]any{optFilter: "id > 3"})}, 0},
		"a stopped reset":                {[]store.Backfill{ended(4, StatusStopped, StartedByReset), loaded(3, "cli", nil)}, 0},
		"a failure between":              {[]store.Backfill{ended(5, StatusStopped, "cli"), ended(4, StatusFailed, "cli"), loaded(3, "cli", nil)}, 0},
		"a schema change refill between": {[]store.Backfill{ended(5, StatusStopped, "cli"), ended(4, StatusStopped, StartedBySchemaChange), loaded(3, "cli", nil)}, 0},
		"none":                           {nil, 0},
	} {
		if got := LoadedBy(c.history); got != c.want {
			t.Errorf("%s: LoadedBy = %d, want %d", name, got, c.want)
		}
	}
}
