package lineage

import (
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// Instances are the cycles of a task that hold rows a backfill changed.
type Instances struct {
	Task   string
	Object string
	Column string
	// Times are the cycles' business times, ascending.
	Times []time.Time
}

// Affected maps what a backfill of stream changed (ds, as the store keeps
// it) to the cycles of each task that reads it, in the tasks' order.
func Affected(tasks []*dag.Task, stream string, ds []store.ChangedDate) ([]Instances, error) {
	return AffectedIf(tasks, stream, ds, nil)
}

// AffectedIf is Affected counting, for each read, only the values keep
// keeps (nil: all).
func AffectedIf(tasks []*dag.Task, stream string, ds []store.ChangedDate, keep func(dag.Read, store.ChangedDate) bool) ([]Instances, error) {
	var out []Instances
	for _, t := range tasks {
		for _, r := range t.Reads {
			if r.Stream != stream {
				continue
			}
			in := Instances{Task: t.ID, Object: config.FormatTable(r.Table), Column: r.DateColumn}
			seen := map[time.Time]bool{}
			for _, d := range ds {
				if d.Object != in.Object || d.Column != in.Column || keep != nil && !keep(r, d) {
					continue
				}
				times, err := PlaceValue(t.Schedule, r, d.Value)
				if err != nil {
					continue // not a date of this column's form: it places no row
				}
				for _, c := range times {
					if !seen[c] {
						seen[c] = true
						in.Times = append(in.Times, c)
					}
				}
			}
			if len(in.Times) > 0 {
				slices.SortFunc(in.Times, time.Time.Compare)
				out = append(out, in)
			}
		}
	}
	return out, nil
}

// PlaceValue places a value kept by Mark, its type told by its form.
func PlaceValue(s calendar.Schedule, r dag.Read, v string) ([]time.Time, error) {
	p, err := NewPlacer(s, r, change.Column{Name: r.DateColumn, Tag: markTag(v)})
	if err != nil {
		return nil, err
	}
	return p.Place(&v)
}

// markTag tells a kept value's type by its form: YYYY-MM-DD, a timestamp,
// or one with a UTC offset.
func markTag(v string) change.Tag {
	switch {
	case len(v) <= 10 || strings.HasSuffix(v, " BC") && len(v) <= 13:
		return change.TagDate
	case len(v) > 19 && strings.ContainsAny(v[19:], "+-"):
		return change.TagTimestampTZ
	}
	return change.TagTimestamp
}

// LateValue reports whether a value kept by Mark was late data for read r
// when it was recorded, at.
func LateValue(r dag.Read, v string, at time.Time) bool {
	return Late(markTag(v), v, r.Location, r.LateAfter, at)
}
