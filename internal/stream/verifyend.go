package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// Verify statuses recorded in a run (store.VerifySummary.Status).
const (
	VerifyRunning = "running"
	VerifyMatch   = "match"
	VerifyDiffer  = "differ"
	VerifyError   = "error"
	VerifyOff     = "off"
)

// verifyEnd verifies what a completed run covered — its ranges, the rows up
// to a sample's end, its filter and columns — and records the result in the
// run; a run whose verify trailed its load (verifytrail.go) waits for its
// last range. With backfill.verify off it does nothing: allRead recorded
// the verify off with the run's Completed.
func (m *backfills) verifyEnd(ctx context.Context, rt *runtime, r *run, c *coverage) {
	if !m.cfg.Verify {
		return // recorded off with the run's Completed (allRead)
	}
	m.update(r, func(b *store.Backfill) { b.Verify = &store.VerifySummary{Status: VerifyRunning} })
	oc, err := m.verifyCovered(ctx, rt, r, c)
	now := time.Now().UTC()
	sum := &store.VerifySummary{Status: VerifyMatch, SourceRows: int64(oc.SourceRows), DestRows: int64(oc.DestRows),
		Ranges: len(oc.Ranges), FinishedAt: &now}
	for _, rc := range oc.Ranges {
		if !rc.Match {
			sum.DifferingRanges++
		}
	}
	switch {
	case err != nil && ctx.Err() != nil:
		sum.Status, sum.Error = VerifyError, "the stream stopped during the verify: run tidemark verify"
	case err != nil:
		sum.Status, sum.Error = VerifyError, err.Error()
	case !oc.Match:
		sum.Status = VerifyDiffer
	}
	if sum.Status == VerifyDiffer {
		reason := fmt.Sprintf("the verify after backfill %d found %d of %d key ranges differing: run tidemark verify --repair %s %s",
			r.rec.ID, sum.DifferingRanges, sum.Ranges, m.stream, config.FormatTable(r.table.ID))
		m.log.Warn("backfill verify found differences", logkey.Backfill(r.rec.ID), logkey.Object(r.table.ID.String()),
			"differing_ranges", sum.DifferingRanges, "ranges", sum.Ranges)
		m.setReason(r, reason)
	}
	if sum.Status != VerifyDiffer {
		m.log.Info("backfill verified", logkey.Backfill(r.rec.ID), logkey.Object(r.table.ID.String()), "verify", sum.Status,
			"source_rows", sum.SourceRows, "destination_rows", sum.DestRows, "error", sum.Error)
	}
	m.update(r, func(b *store.Backfill) { b.Verify = sum }) // last: waiting on it sees the reason
}

// verifyCovered compares what run r covered: the result of its trail, or
// a pass over its ranges now. A trail that failed (the source or the
// destination unreachable for a moment while the run loaded) is not
// believed: the pass is made again, whole, as it would have been.
func (m *backfills) verifyCovered(ctx context.Context, rt *runtime, r *run, c *coverage) (ObjectCheck, error) {
	if c.trail != nil {
		oc, err := c.trail.result(ctx)
		if err == nil || ctx.Err() != nil {
			return oc, err
		}
		m.log.Warn("the verify that followed the backfill failed; verifying the whole table again", logkey.Backfill(r.rec.ID),
			logkey.Object(r.table.ID.String()), logkey.Err(err))
	}
	ranges := c.opts.ranges
	if c.sampleEnd != nil {
		ranges = []keyRange{{High: c.sampleEnd}}
	}
	return verifyObject(ctx, rt, r.table, m.cfg.ChunkSize, ranges, c.scope)
}

// endInterruptedVerifies records, after a restart, the verifies the daemon
// was running when it stopped (killed: a clean stop records its own) as
// ended in error, in recs too; none is started again.
func (m *backfills) endInterruptedVerifies(ctx context.Context, recs []store.Backfill) error {
	for i := range recs {
		if v := recs[i].Verify; v == nil || v.Status != VerifyRunning {
			continue
		}
		now := time.Now().UTC()
		recs[i].Verify = &store.VerifySummary{Status: VerifyError, FinishedAt: &now,
			Error: "the daemon stopped during the verify: run tidemark verify"}
		if err := m.st.UpdateBackfill(ctx, recs[i]); err != nil {
			return fmt.Errorf("record the interrupted verify of backfill %d: %w", recs[i].ID, err)
		}
	}
	return nil
}

// setReason shows reason on a run's object while the run is its latest.
func (m *backfills) setReason(r *run, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.st.SetRunObjectReason(m.writeCtx(), m.stream, r.rec.Schema, r.rec.Table, r.rec.ID, reason); err != nil {
		m.log.Error("record object reason", logkey.Object(r.rec.Schema+"."+r.rec.Table), logkey.Err(err))
	}
}

// StartedByRepair marks the backfills Repair starts.
const StartedByRepair = "repair"

// Repair starts, for each checked object whose ranges differ, one backfill
// of just those ranges (adjacent ones joined), started by "repair", and
// names it in the object's result. An object that may not be backfilled
// now (one is active) gets the refusal as its error.
func (s *Stream) Repair(ctx context.Context, checks []ObjectCheck) ([]ObjectCheck, error) {
	for i := range checks {
		oc := &checks[i]
		ranges := differing(oc.Ranges)
		if oc.Error != "" || len(ranges) == 0 {
			continue
		}
		recs, err := s.bf.initiate(ctx, []change.TableID{oc.id}, StartedByRepair, BackfillOptions{ranges: ranges}.record(nil), false)
		var refused *RefusedError
		switch {
		case errors.As(err, &refused):
			oc.Error = "not repaired: " + refused.Msg
		case err != nil:
			return checks, fmt.Errorf("repair %s: %w", oc.Object, err)
		case len(recs) == 1:
			oc.Repair = &recs[0]
		}
	}
	return checks, nil
}

// differing returns the ranges that differ, adjacent ones joined.
func differing(checks []RangeCheck) []keyRange {
	var out []keyRange
	joined := false // the previous range differed too
	for _, rc := range checks {
		if rc.Match {
			joined = false
			continue
		}
		high := keyFromText(rc.High)
		if joined {
			out[len(out)-1].High = high
			continue
		}
		out = append(out, keyRange{Low: keyFromText(rc.Low), High: high})
		joined = true
	}
	return out
}
