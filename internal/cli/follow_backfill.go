package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// followBackfills follows streams' backfill runs from pushed events until
// each has ended: completed and loaded (its last chunk committed in the
// destination) and its ending verify over, stopped or failed. It shows a
// line per run — redrawn on a terminal, printed on changes otherwise — or,
// with --json, the record as one JSON line at each change, then the
// ending verifies. It returns an error naming the runs that did not
// complete, or one with exit code 3 when a verify found differences.
//
// When the daemon stops answering, it subscribes again for up to
// g.reconnect (none when 0) and reads the runs' records anew: a restarted
// daemon resumes the backfills.
func (g *globals) followBackfills(ctx context.Context, es *eventStream, recs []store.Backfill) error {
	f := g.newBackfillFollower(recs)
	if err := f.render(false); err != nil {
		return err
	}
	defer func() { es.Close() }() // the last subscription; the caller closes the first
	// Events are pushed, but the daemon drops those a subscriber is too
	// slow for: a run not heard of for 2 seconds is read again.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for f.open() > 0 {
		select {
		case ev, ok := <-es.events:
			if !ok {
				next, err := f.resubscribe(ctx, es)
				if err != nil {
					return err
				}
				es = next
				continue
			}
			if ev.Backfill != nil {
				f.apply(*ev.Backfill)
			}
		case <-tick.C:
			// While the daemon is away, the closed event stream
			// reconnects.
			if err := f.rereadUnheard(ctx); err != nil && !(g.reconnect > 0 && isUnreachable(err)) {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := f.render(false); err != nil {
			return err
		}
	}
	if err := f.render(true); err != nil {
		return err
	}
	if !g.json {
		f.printVerifies()
	}
	return f.incomplete()
}

// backfillFollower is the state of followBackfills: the runs followed, in
// the order given, and how they were last shown.
type backfillFollower struct {
	g     *globals
	order []int64
	runs  map[int64]*followedRun
	pr    *progress // nil with --json
}

// followedRun is one run a backfillFollower follows.
type followedRun struct {
	rec   store.Backfill
	heard time.Time // the last event or read of the record
	sent  string    // --json: the record as last printed
	// loaded is when the run was first seen completed and loaded.
	loaded time.Time
}

// verifyGrace is how long a run completed and loaded without an ending
// verify is waited for before it counts as ended: the verify starts right
// after the run completes, unless the daemon stopped in between.
const verifyGrace = 5 * time.Second

// ended reports whether r is over for --wait: stopped, failed, or
// completed and loaded with its ending verify over.
func (r *followedRun) ended() bool {
	if !backfillEnded(r.rec) {
		return false
	}
	if r.rec.Status != store.StatusCompleted {
		return true
	}
	if v := r.rec.Verify; v != nil {
		return v.Status != verifyRunning
	}
	return !r.loaded.IsZero() && time.Since(r.loaded) >= verifyGrace
}

// verifyRunning is the status of an ending verify still running
// (stream.VerifyRunning).
const verifyRunning = "running"

func (g *globals) newBackfillFollower(recs []store.Backfill) *backfillFollower {
	f := &backfillFollower{g: g, runs: map[int64]*followedRun{}}
	now := time.Now()
	for _, b := range recs {
		if f.runs[b.ID] == nil {
			f.order = append(f.order, b.ID)
		}
		f.runs[b.ID] = &followedRun{rec: b, heard: now}
	}
	if !g.json {
		f.pr = g.progress()
	}
	return f
}

// apply takes a record of a followed run from an event or a read, unless
// the run has ended or the record is older than the one held.
func (f *backfillFollower) apply(b store.Backfill) {
	r := f.runs[b.ID]
	if r == nil {
		return
	}
	r.heard = time.Now()
	if !r.ended() && !staler(b, r.rec) {
		r.rec = b
	}
	if r.loaded.IsZero() && backfillEnded(r.rec) {
		r.loaded = r.heard
	}
}

// open counts the runs that have not ended.
func (f *backfillFollower) open() int {
	n := 0
	for _, r := range f.runs {
		if !r.ended() {
			n++
		}
	}
	return n
}

// rereadUnheard reads again the record of each open run not heard of for
// 2 seconds.
func (f *backfillFollower) rereadUnheard(ctx context.Context) error {
	for _, id := range f.order {
		r := f.runs[id]
		if r.ended() || time.Since(r.heard) < 2*time.Second {
			continue
		}
		var b store.Backfill
		if err := f.g.client().do(ctx, "GET", fmt.Sprintf("/api/v1/backfills/%d", id), nil, &b); err != nil {
			return err
		}
		f.apply(b)
	}
	return nil
}

// render shows the runs: their progress lines (the last time when final),
// or with --json each record that changed since it was last printed.
func (f *backfillFollower) render(final bool) error {
	if f.g.json {
		return f.printChanged()
	}
	items := make([]progressItem, len(f.order))
	for i, id := range f.order {
		items[i] = backfillItem(f.runs[id].rec)
	}
	if final {
		f.pr.final(items)
	} else {
		f.pr.update(items)
	}
	return nil
}

// printChanged prints, as a JSON line each, the records that changed since
// they were last printed.
func (f *backfillFollower) printChanged() error {
	for _, id := range f.order {
		r := f.runs[id]
		data, err := json.Marshal(r.rec)
		if err != nil {
			return err
		}
		if string(data) != r.sent {
			r.sent = string(data)
			if _, err := fmt.Fprintf(f.g.rawOut(), "%s\n", data); err != nil {
				return err
			}
		}
	}
	return nil
}

// incomplete is an error naming the runs that did not complete, or nil.
func (f *backfillFollower) incomplete() error {
	var bad []string
	for _, id := range f.order {
		b := f.runs[id].rec
		if b.Status != store.StatusCompleted {
			msg := fmt.Sprintf("backfill %d of %s.%s %s", b.ID, b.Schema, b.Table, b.Status)
			if b.Error != "" {
				msg += ": " + b.Error
			}
			bad = append(bad, msg)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	for _, id := range f.order {
		if b := f.runs[id].rec; b.Verify != nil && b.Verify.Status == verifyDiffer {
			bad = append(bad, verifySentence(b))
		}
	}
	if len(bad) > 0 {
		return &exitError{code: ExitMismatch, err: fmt.Errorf("%s", strings.Join(bad, "; "))}
	}
	return nil
}

// backfillEnded reports whether a run is over for --wait: stopped, failed,
// or completed and loaded.
func backfillEnded(b store.Backfill) bool {
	switch b.Status {
	case store.StatusStopped, store.StatusFailed:
		return true
	case store.StatusCompleted:
		return b.LoadedAt != nil
	}
	return false
}

// staler reports whether record b is older than cur: a read of the record
// can overtake events still in the subscription's buffer.
func staler(b, cur store.Backfill) bool {
	rank := func(b store.Backfill) int {
		switch {
		case b.Status == store.StatusPending:
			return 0
		case b.Status == store.StatusActive:
			return 1
		case backfillEnded(b):
			return 3
		}
		return 2 // completed, not loaded yet
	}
	if rb, rc := rank(b), rank(cur); rb != rc {
		return rb < rc
	}
	return b.RowsRead < cur.RowsRead || b.RowsWritten < cur.RowsWritten || b.Chunks < cur.Chunks
}

// backfillItem is a run's progress line. The API has no row estimate of
// a table, so there is no total: rows, chunks, rate and status.
func backfillItem(b store.Backfill) progressItem {
	status := b.Status
	if b.Status == store.StatusCompleted && b.LoadedAt == nil {
		status = "completed, loading"
	}
	if b.Error != "" {
		status += ": " + b.Error
	}
	// The bar counts rows read against the source's estimate: a populated
	// destination is written only where it differs.
	total := b.RowsEstimate
	if total > 0 && b.RowsRead > total {
		total = b.RowsRead // the table grew since the estimate
	}
	return progressItem{
		Key:    fmt.Sprint(b.ID),
		Label:  fmt.Sprintf("backfill %d of %s.%s", b.ID, b.Schema, b.Table),
		Done:   b.RowsRead,
		Total:  total,
		Unit:   "rows read",
		Rate:   "rows",
		Detail: []string{thousands(b.RowsWritten) + " written", thousands(b.Chunks) + " chunks", verifyDetail(b.Verify)},
		Status: status,
		Ended:  backfillEnded(b),
	}
}
