package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source"
)

// checkScope checks a filter and a column subset against each object's
// table, as far as the stream knows the tables: an object it does not
// stream yet is checked when its backfill starts (and fails then).
func (s *Stream) checkScope(ctx context.Context, ids []change.TableID, o BackfillOptions) error {
	if !o.partial() {
		return nil
	}
	s.bf.mu.Lock()
	rt := s.bf.rt
	s.bf.mu.Unlock()
	filter, err := o.parseFilter()
	if err != nil {
		return &InvalidError{Msg: err.Error()}
	}
	var problems []string
	for _, id := range ids {
		t := s.lookup(id)
		if t == nil {
			continue
		}
		problems = append(problems, columnProblems(t, o.Columns)...)
		if filter == nil || rt == nil {
			continue
		}
		err := rt.src.CheckFilter(ctx, t, filter)
		var refused *rowfilter.Error
		switch {
		case errors.As(err, &refused):
			problems = append(problems, err.Error())
		case errors.Is(err, source.ErrFilter):
			problems = append(problems, err.Error()+": give a SQL condition on the source table's columns, as after WHERE")
		case err != nil:
			return fmt.Errorf("check the filter: %w", err)
		}
	}
	if len(problems) > 0 {
		return &InvalidError{Msg: strings.Join(problems, "; ")}
	}
	return nil
}

// columnProblems says what is wrong with a column subset of t.
func columnProblems(t *change.Table, cols []string) []string {
	var out []string
	for _, c := range cols {
		i := t.ColumnIndex(c)
		switch {
		case i < 0:
			names := make([]string, len(t.Columns))
			for j, col := range t.Columns {
				names[j] = col.Name
			}
			out = append(out, fmt.Sprintf("%s has no column %q: its columns are %s", t.ID, c, strings.Join(names, ", ")))
		case slices.Contains(t.Key, i):
			out = append(out, fmt.Sprintf("column %q is part of the key of %s: the key is always read, name only the columns to fill", c, t.ID))
		}
	}
	return out
}

// scopeOf is what a chunk read asks beyond its key range. A filter
// recorded by an older tidemark that the filter grammar now refuses is an
// error: the run fails before reading anything.
func scopeOf(o BackfillOptions) (chunkSpec, error) {
	filter, err := o.parseFilter()
	if err != nil {
		return chunkSpec{}, fmt.Errorf("%w; nothing was read: initiate the backfill again with a filter of the form docs/backfill.md describes", err)
	}
	return chunkSpec{Filter: filter, Columns: o.Columns}, nil
}

// project keeps, in each row, the key and the columns a column subset
// covers (all when cols is nil), for comparing only what a backfill wrote.
func project(t *change.Table, rows []change.Row, cols []string) []change.Row {
	if cols == nil {
		return rows
	}
	var keep []int
	for i, c := range t.Columns {
		if slices.Contains(t.Key, i) || slices.Contains(cols, c.Name) {
			keep = append(keep, i)
		}
	}
	out := make([]change.Row, len(rows))
	for n, r := range rows {
		p := make(change.Row, len(r))
		for i := range p {
			p[i] = change.Null
		}
		for _, i := range keep {
			p[i] = r[i]
		}
		out[n] = p
	}
	return out
}

// keepUnresolved takes, for the values of merged source rows that stayed
// Unchanged (a TOASTed value an update left alone, no earlier state known),
// the destination's value of the row with the same key: the value the sink
// kept, which verify cannot compare with anything.
func keepUnresolved(t *change.Table, src, dst []change.Row) []change.Row {
	var byKey map[string]change.Row
	out := src
	for n, r := range src {
		if !slices.ContainsFunc(r, func(v change.Value) bool { return v.Unchanged }) {
			continue
		}
		if byKey == nil {
			byKey = make(map[string]change.Row, len(dst))
			for _, d := range dst {
				byKey[t.RowKey(d).Encode()] = d
			}
			out = slices.Clone(src)
		}
		d := byKey[t.RowKey(r).Encode()]
		if d == nil {
			continue
		}
		filled := slices.Clone(r)
		for i, v := range r {
			if v.Unchanged {
				filled[i] = d[i]
			}
		}
		out[n] = filled
	}
	return out
}
