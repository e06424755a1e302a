package lineage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
)

// checkTimeout bounds the catalog reads of one stream's source.
const checkTimeout = 20 * time.Second

// CheckReads checks every task's reads against its stream's source: the
// table exists, has the date column, and the column can place rows on
// dates. Each problem names the read's configuration key and the fix. A
// source it cannot reach is logged and its reads are left unchecked: the
// stream itself says why it cannot start.
func CheckReads(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	var problems []error
	for _, s := range cfg.Streams {
		reads := readsOf(cfg, s.Name)
		if len(reads) == 0 {
			continue
		}
		found, err := describe(ctx, s, reads)
		if err != nil {
			log.Warn("the reads of tasks were not checked: the stream's source cannot be read", logkey.Stream(s.Name), logkey.Err(err))
			continue
		}
		for _, r := range reads {
			if err := checkRead(cfg, r, found); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", r.key, err))
			}
		}
	}
	return errors.Join(problems...)
}

// taskRead is one read with where the configuration declares it.
type taskRead struct {
	key   string // "tasks[2].reads[0]"
	task  int
	read  int
	table change.TableID
}

func readsOf(cfg *config.Config, stream string) []taskRead {
	var out []taskRead
	for i, t := range cfg.Tasks {
		for j, r := range t.Reads {
			if r.Stream == stream {
				out = append(out, taskRead{key: fmt.Sprintf("tasks[%d].reads[%d]", i, j), task: i, read: j, table: r.Table})
			}
		}
	}
	return out
}

// described is a table as the source describes it, or why it could not.
type described struct {
	table *change.Table
	err   error
}

// describe reads the shape of every table the reads name, over one
// short-lived connection. It fails only when the source cannot be read
// at all.
func describe(ctx context.Context, s config.Stream, reads []taskRead) (map[change.TableID]described, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	typ, err := source.Lookup(s.Source.Type)
	if err != nil {
		return nil, err
	}
	conn, err := typ.OpenEstimator(ctx, s.Source)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	out := map[change.TableID]described{}
	for _, tr := range reads {
		id := tr.table
		if _, done := out[id]; done {
			continue
		}
		t, err := conn.Describe(ctx, id, s.Keys[id])
		if err != nil && !errors.Is(err, source.ErrNoTable) && !errors.Is(err, source.ErrNoKey) {
			return nil, fmt.Errorf("describe %s: %w", config.FormatTable(id), err)
		}
		out[id] = described{table: t, err: err}
	}
	return out, nil
}

// checkRead checks one read against its table's description.
func checkRead(cfg *config.Config, tr taskRead, found map[change.TableID]described) error {
	t := cfg.Tasks[tr.task]
	r := t.Reads[tr.read]
	d := found[r.Table]
	switch {
	case errors.Is(d.err, source.ErrNoTable):
		return fmt.Errorf("stream %s's source has no table %s: create it, or correct object", r.Stream, config.FormatTable(r.Table))
	case d.err != nil:
		return fmt.Errorf("stream %s cannot replicate %s (%v): give it a primary key, or name its key columns under the stream's keys", r.Stream, config.FormatTable(r.Table), d.err)
	}
	var names []string
	for _, c := range d.table.Columns {
		if c.Name == r.DateColumn {
			_, err := NewPlacer(t.Schedule, r, c)
			return err
		}
		names = append(names, c.Name)
	}
	return fmt.Errorf("%s has no column %q: set date_column to one of %s", config.FormatTable(r.Table), r.DateColumn, strings.Join(names, ", "))
}
