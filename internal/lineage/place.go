// Package lineage connects streamed tables to the recurring tasks that
// read them: on which business dates a changed row falls, and which
// instances of a reading task hold those dates (docs/lineage.md).
package lineage

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/change"
)

// Placer maps values of one read's date column to the cycles of the
// reading task's schedule.
type Placer struct {
	schedule calendar.Schedule
	loc      *time.Location // the zone the column's values are read in
	tag      change.Tag
}

// NewPlacer checks that col, the column read r names, can place rows on
// business dates: a date, a timestamp (read as wall time in r's zone) or a
// timestamptz.
func NewPlacer(s calendar.Schedule, r dag.Read, col change.Column) (*Placer, error) {
	tag := change.TagOf(col)
	switch tag {
	case change.TagDate, change.TagTimestamp, change.TagTimestampTZ:
	default:
		typ := col.Native
		if typ == "" {
			typ = col.Type
		}
		return nil, fmt.Errorf("column %q of %s is %s, which places no row on a date: name a date, timestamp or timestamptz column as date_column",
			col.Name, r.Object, typ)
	}
	loc := r.Location
	if loc == nil {
		loc = s.Location
	}
	if loc == nil {
		loc = time.UTC
	}
	return &Placer{schedule: s, loc: loc, tag: tag}, nil
}

// Place returns the business times of the cycles whose data a row with
// date column value v (in its tag's canonical text) belongs to, ascending.
// A NULL (nil), ±infinity or a BC value belongs to none.
func (p *Placer) Place(v *string) ([]time.Time, error) {
	if v == nil {
		return nil, nil
	}
	from, to, ok, err := p.span(*v)
	if err != nil || !ok {
		return nil, err
	}
	if p.schedule.DayBased() {
		// Business dates are local dates in the read's zone; a weekly or
		// monthly cycle holds the dates up to its next cycle's.
		d := calendar.DateOf(from.In(p.loc))
		c, ok := p.schedule.Prev(d.AddDays(1).Midnight(p.scheduleLoc()))
		if !ok {
			return nil, nil
		}
		return []time.Time{c}, nil
	}
	// Sub-day cycles hold the instants up to the next cycle's start: the
	// one covering from, and every one starting before to.
	var out []time.Time
	if c, ok := p.schedule.Prev(from.Add(time.Nanosecond)); ok {
		out = append(out, c)
	}
	return p.schedule.AppendCycles(out, from.Add(time.Nanosecond), to), nil
}

// span is the instants a value stands for: [from, to) for a date's whole
// local day, from == to for a point in time. ok is false for ±infinity and
// BC values.
func (p *Placer) span(v string) (from, to time.Time, ok bool, err error) {
	if v == "infinity" || v == "-infinity" || strings.HasSuffix(v, " BC") {
		return time.Time{}, time.Time{}, false, nil
	}
	switch p.tag {
	case change.TagDate:
		d, err := calendar.ParseDate(v)
		if err != nil {
			return from, to, false, fmt.Errorf("date value %q: %w", v, err)
		}
		return d.Midnight(p.loc), d.AddDays(1).Midnight(p.loc), true, nil
	case change.TagTimestamp:
		t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", v, p.loc)
		if err != nil {
			return from, to, false, fmt.Errorf("timestamp value %q: %w", v, err)
		}
		return t, t, true, nil
	default:
		t, err := time.Parse("2006-01-02 15:04:05.999999-07", v)
		if err != nil {
			t, err = time.Parse("2006-01-02 15:04:05.999999-07:00", v)
		}
		if err != nil {
			return from, to, false, fmt.Errorf("timestamptz value %q: %w", v, err)
		}
		return t, t, true, nil
	}
}

func (p *Placer) scheduleLoc() *time.Location {
	if p.schedule.Location != nil {
		return p.schedule.Location
	}
	return time.UTC
}

// Mark is how a changed date value is kept: a timestamp cut to its minute
// (cycles start on whole minutes), a date or anything else as it is. The
// result is in the tag's canonical form, so Place reads it.
func Mark(tag change.Tag, v string) string {
	switch tag {
	case change.TagTimestamp, change.TagTimestampTZ:
		// "YYYY-MM-DD HH:MM:SS[.ffffff][+00]": keep the minute, zero the rest.
		if len(v) >= 19 && v[10] == ' ' && v[13] == ':' && v[16] == ':' && !strings.HasSuffix(v, " BC") {
			rest := v[19:]
			if i := strings.IndexAny(rest, "+-"); i >= 0 {
				return v[:17] + "00" + rest[i:]
			}
			return v[:17] + "00"
		}
	}
	return v
}

// Late reports whether a value of a date column of tag (its canonical
// text), its dates read in loc, is late data at now: the day it names, or
// the instant, ended more than after ago. NULL, ±infinity and BC values
// are not.
func Late(tag change.Tag, v string, loc *time.Location, after time.Duration, now time.Time) bool {
	if loc == nil {
		loc = time.UTC
	}
	p := &Placer{loc: loc, tag: tag}
	_, end, ok, err := p.span(v)
	return err == nil && ok && !end.After(now.Add(-after))
}
