package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/store"
)

// BackfillOptions are what an initiate may ask of its runs beyond the
// stream's configuration. They are kept in each run's record (Options), so
// that a restarted daemon runs them the same way.
type BackfillOptions struct {
	// SampleRows reads only about the first SampleRows rows in key order
	// (whole chunks; rows inserted meanwhile in the range count too) and
	// leaves the rest of the destination table alone; 0 reads them all.
	SampleRows int64
	// RunAt keeps the runs pending until then (quiet hours); nil starts
	// them when their turn comes.
	RunAt *time.Time
	// RowsPerSecond limits each run's reads; 0 takes the stream's
	// backfill.rows_per_second. A running run's limit can be changed.
	RowsPerSecond float64
	// Filter is a condition on the source table's columns, as after WHERE
	// (the form package rowfilter accepts): only the rows matching it are
	// read, and the destination's other rows are left alone ("" reads
	// every row).
	Filter string
	// Columns names the non-key columns to fill (nil: all): only they are
	// read, and only rows the destination holds are written, their other
	// columns left alone (filling a newly added column).
	Columns []string
	// AsOneRun makes the backfills of one initiate one run (see
	// store.Run); it is not recorded per backfill.
	AsOneRun bool
	// ranges restricts the run to these key ranges, in key order (nil: the
	// whole table): a repair re-reads only what verify found differing.
	ranges []keyRange
}

// keyRange is the key range (Low, High] of a table; nil is unbounded.
type keyRange struct{ Low, High change.Key }

// partial says whether the options read only part of a table's rows or
// columns: then the destination's other rows are left alone.
func (o BackfillOptions) partial() bool { return o.Filter != "" || o.Columns != nil }

// Option keys in a run's record.
const (
	optSampleRows    = "sample_rows"
	optRunAt         = "run_at"
	optRowsPerSecond = "rows_per_second"
	optFilter        = "filter"
	optColumns       = "columns"
	optRanges        = "ranges"
)

// Validate checks the options against now.
func (o BackfillOptions) Validate(now time.Time) error {
	switch {
	case o.SampleRows < 0 || o.SampleRows > MaxSampleRows:
		return fmt.Errorf("sample_rows %d: use a positive number of rows up to %d, or 0 for all", o.SampleRows, int64(MaxSampleRows))
	case CheckRate(o.RowsPerSecond) != nil:
		return CheckRate(o.RowsPerSecond)
	case o.RunAt != nil && !o.RunAt.After(now):
		return fmt.Errorf("run_at %s is not in the future: leave it out to start now", o.RunAt.Format(time.RFC3339))
	case o.Filter != "" && strings.TrimSpace(o.Filter) == "":
		return errors.New("filter is blank: give a SQL condition on the source table, or leave it out for every row")
	case len(o.Filter) > rowfilter.MaxBytes:
		return fmt.Errorf("filter is %d bytes: keep it under %d", len(o.Filter), rowfilter.MaxBytes)
	case o.Columns != nil && len(o.Columns) == 0:
		return errors.New("columns is empty: name the columns to fill, or leave it out for all")
	}
	_, err := o.parseFilter()
	return err
}

// parseFilter reads the filter (nil when there is none), or says what in
// it is refused.
func (o BackfillOptions) parseFilter() (*rowfilter.Filter, error) {
	if o.Filter == "" {
		return nil, nil
	}
	return rowfilter.Parse(o.Filter)
}

// MaxSampleRows bounds sample_rows.
const MaxSampleRows = 1_000_000_000_000

// CheckRate checks a rows-per-second limit an initiate or a rate change
// asks for: 0 (the stream's), or 1 to config.MaxRowsPerSecond. Below one
// row a second the pace's arithmetic overflowed into no limit at all; NaN
// and infinities are no rate.
func CheckRate(rate float64) error {
	if rate == 0 || (rate >= 1 && rate <= config.MaxRowsPerSecond) {
		return nil
	}
	return fmt.Errorf("rows_per_second %g: use a rate from 1 to %d rows per second, or 0 for the stream's", rate, config.MaxRowsPerSecond)
}

// record adds the options to a run's options map (which may be nil).
func (o BackfillOptions) record(m map[string]any) map[string]any {
	set := func(k string, v any) {
		if m == nil {
			m = map[string]any{}
		}
		m[k] = v
	}
	if o.SampleRows > 0 {
		set(optSampleRows, float64(o.SampleRows)) // as JSON numbers decode
	}
	if o.RunAt != nil {
		set(optRunAt, o.RunAt.UTC().Format(time.RFC3339Nano))
	}
	if o.RowsPerSecond > 0 {
		set(optRowsPerSecond, o.RowsPerSecond)
	}
	if o.Filter != "" {
		set(optFilter, o.Filter)
	}
	if o.Columns != nil {
		set(optColumns, toAny(o.Columns))
	}
	if o.ranges != nil {
		rs := make([]any, len(o.ranges))
		for i, r := range o.ranges {
			rs[i] = map[string]any{"low": toAny(keyText(r.Low)), "high": toAny(keyText(r.High))}
		}
		set(optRanges, rs)
	}
	return m
}

// toAny turns strings into a JSON array as a decoded record holds it.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// stringsOf reads a JSON array of strings back; nil when v is not one.
func stringsOf(v any) []string {
	arr, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// keyOf is a key from its text values in a decoded record.
func keyOf(v any) change.Key { return keyFromText(stringsOf(v)) }

// keyFromText is a key from its text values (nil for none: unbounded).
func keyFromText(ss []string) change.Key {
	if len(ss) == 0 {
		return nil
	}
	k := make(change.Key, len(ss))
	for i, s := range ss {
		k[i] = change.Text(s)
	}
	return k
}

// optionsOf reads the options back from a run's record; values it cannot
// read are left at their defaults.
func optionsOf(b store.Backfill) BackfillOptions {
	var o BackfillOptions
	if v, ok := b.Options[optSampleRows].(float64); ok && v > 0 {
		o.SampleRows = int64(v)
	}
	if v, ok := b.Options[optRunAt].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			o.RunAt = &t
		}
	}
	if v, ok := b.Options[optRowsPerSecond].(float64); ok && v > 0 {
		o.RowsPerSecond = v
	}
	o.Filter, _ = b.Options[optFilter].(string)
	if v, ok := b.Options[optColumns]; ok {
		o.Columns = stringsOf(v)
	}
	if rs, ok := b.Options[optRanges].([]any); ok {
		o.ranges = make([]keyRange, 0, len(rs))
		for _, r := range rs {
			m, _ := r.(map[string]any)
			o.ranges = append(o.ranges, keyRange{Low: keyOf(m["low"]), High: keyOf(m["high"])})
		}
	}
	return o
}

// InitiateWith starts backfills of objects with options.
func (s *Stream) InitiateWith(ctx context.Context, ids []change.TableID, startedBy string, o BackfillOptions) ([]store.Backfill, error) {
	if err := o.Validate(time.Now()); err != nil {
		return nil, &InvalidError{Msg: err.Error()}
	}
	if err := s.destinationCan(o); err != nil {
		return nil, err
	}
	if err := s.checkScope(ctx, ids, o); err != nil {
		return nil, err
	}
	return s.bf.initiate(ctx, ids, startedBy, o.record(nil), o.AsOneRun)
}

// destinationCan refuses the options the stream's destination cannot
// honour: a filtered or column-subset backfill leaves the rows or columns
// it does not read in place, which only a destination that replaces key
// ranges in place can do.
func (s *Stream) destinationCan(o BackfillOptions) error {
	typ := s.cfg.Destination.Type
	var msg string
	switch {
	case o.Filter != "":
		msg = sink.Refusal(typ, sink.ReplaceRanges, "a filtered backfill (filter)", "leave filter out to backfill every row")
	case o.Columns != nil:
		msg = sink.Refusal(typ, sink.ReplaceRanges, "a column-subset backfill (columns)", "leave columns out to backfill whole rows")
	}
	if msg != "" {
		return &InvalidError{Msg: msg}
	}
	return nil
}

// InvalidError is an initiate whose options are invalid.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// SetRowsPerSecond changes the read limit of a pending or active run
// (0: the stream's); an active run applies it from its next chunk.
func (s *Stream) SetRowsPerSecond(ctx context.Context, id int64, rate float64) (store.Backfill, error) {
	if err := CheckRate(rate); err != nil {
		return store.Backfill{}, &InvalidError{Msg: err.Error()}
	}
	m := s.bf
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.byID[id]
	if r == nil || (r.rec.Status != StatusPending && r.rec.Status != StatusActive) {
		rec, err := m.st.GetBackfill(ctx, id)
		if err != nil {
			return store.Backfill{}, err
		}
		if rec.Stream != s.cfg.Name {
			return store.Backfill{}, fmt.Errorf("backfill %d is not of stream %s: %w", id, s.cfg.Name, store.ErrNotFound)
		}
		return store.Backfill{}, &RefusedError{Msg: fmt.Sprintf("cannot change the rate of backfill %d: it is %s, not pending or active", id, rec.Status)}
	}
	m.update(r, func(b *store.Backfill) {
		// A copy: published events share the record's map, and subscribers
		// may be encoding it right now.
		opts := maps.Clone(b.Options)
		if opts == nil {
			opts = map[string]any{}
		}
		if rate > 0 {
			opts[optRowsPerSecond] = rate
		} else {
			delete(opts, optRowsPerSecond)
		}
		b.Options = opts
	})
	select {
	case r.rateChanged() <- struct{}{}:
	default: // a wake-up is pending already
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec, nil
}

// rate is the run's current read limit in rows per second (0: none).
func (m *backfills) rate(r *run) float64 {
	r.mu.Lock()
	o := optionsOf(r.rec)
	r.mu.Unlock()
	if o.RowsPerSecond > 0 {
		return o.RowsPerSecond
	}
	return m.cfg.RowsPerSecond
}

// due says whether a pending run may start now; when it may not, it also
// returns when it may.
func due(r *run, now time.Time) (bool, time.Time) {
	r.mu.Lock()
	o := optionsOf(r.rec)
	r.mu.Unlock()
	if o.RunAt != nil && o.RunAt.After(now) {
		return false, *o.RunAt
	}
	return true, time.Time{}
}

// wakeAtLocked makes the scheduler look at the queue again at t, for runs
// waiting for their start time; the earliest wake-up wins.
func (m *backfills) wakeAtLocked(t time.Time) {
	if m.wake != nil && !m.wakeAt.After(t) && m.wakeAt.After(time.Now()) {
		return
	}
	if m.wake != nil {
		m.wake.Stop()
	}
	m.wakeAt = t
	m.wake = time.AfterFunc(time.Until(t), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.wake = nil
		m.scheduleLocked()
	})
}

// sampleLimit is how many rows the next chunk of a run may read, given the
// rows read so far: a chunk, or what is left of a sample (at least one row,
// so that a sample always ends with a chunk that bounds it).
func sampleLimit(o BackfillOptions, chunk int, read int64) int {
	if o.SampleRows <= 0 {
		return chunk
	}
	return int(max(min(int64(chunk), o.SampleRows-read), 1))
}

// sampleEnds says whether a sampling run has read all it samples.
func sampleEnds(o BackfillOptions, read int64) bool {
	return o.SampleRows > 0 && read >= o.SampleRows
}

// pendingReason is what a pending object shows: when it starts, if it
// waits for a start time.
func pendingReason(b store.Backfill) string {
	if o := optionsOf(b); o.RunAt != nil {
		return "scheduled to start at " + o.RunAt.UTC().Format(time.RFC3339)
	}
	return ""
}
