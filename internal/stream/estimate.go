package stream

import (
	"context"
	"slices"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// ObjectEstimate is what a backfill of one object would read, and for how
// long.
type ObjectEstimate struct {
	Object    string  `json:"object"`
	Rows      int64   `json:"rows"` // -1: unknown (a large table never analyzed)
	RowsExact bool    `json:"rows_exact"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"` // 0: unknown
	Error     string  `json:"error,omitempty"`
}

// Estimate is the cost of backfilling some objects of a stream, before
// starting: rows and bytes from the source, the duration from the rate
// this stream's earlier backfills reached (capped by rows_per_second).
type Estimate struct {
	Objects []ObjectEstimate `json:"objects"`
	Rows    int64            `json:"rows"` // of the objects whose rows are known
	Bytes   int64            `json:"bytes"`
	// Seconds is the expected duration of backfilling them all, with
	// backfill.max_concurrent of them at once; 0 when the rate is unknown.
	Seconds float64 `json:"seconds"`
	// RowsPerSecond is the rate of one backfill the duration assumes, and
	// Basis says where it comes from.
	RowsPerSecond float64 `json:"rows_per_second"`
	Basis         string  `json:"basis"`
}

// recentRuns is how many completed backfills the measured rate averages.
const recentRuns = 20

// Estimate sizes the objects ids (none: every object of the stream) on the
// source through a connection of its own, so that it works whether or not
// the stream is running.
func (s *Stream) Estimate(ctx context.Context, ids []change.TableID) (Estimate, error) {
	if len(ids) == 0 {
		objs, err := s.st.ListObjects(ctx, s.cfg.Name)
		if err != nil {
			return Estimate{}, err
		}
		for _, o := range objs {
			ids = append(ids, change.TableID{Schema: o.Schema, Name: o.Table})
		}
	}
	rate, basis, err := s.backfillRate(ctx)
	if err != nil {
		return Estimate{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	typ, err := source.Lookup(s.cfg.Source.Type)
	if err != nil {
		return Estimate{}, err
	}
	conn, err := typ.OpenEstimator(ctx, s.cfg.Source)
	if err != nil {
		return Estimate{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	est := Estimate{Objects: []ObjectEstimate{}, RowsPerSecond: rate, Basis: basis}
	var durations []float64
	for _, id := range ids {
		oe := ObjectEstimate{Object: config.FormatTable(id), Rows: -1}
		size, err := conn.EstimateTable(ctx, id)
		if err != nil {
			oe.Error = err.Error()
			est.Objects = append(est.Objects, oe)
			continue
		}
		oe.Rows, oe.RowsExact, oe.Bytes = size.Rows, size.Exact, size.Bytes
		est.Bytes += size.Bytes
		if size.Rows >= 0 {
			est.Rows += size.Rows
			if rate > 0 {
				oe.Seconds = float64(size.Rows) / rate
				durations = append(durations, oe.Seconds)
			}
		}
		est.Objects = append(est.Objects, oe)
	}
	if rate > 0 {
		est.Seconds = makespan(durations, s.cfg.Backfill.MaxConcurrent)
	}
	return est, nil
}

// makespan is how long backfills of the given durations take when they run
// lanes at a time, each starting, in order, as soon as one ends: never
// shorter than the longest one, nor than their sum shared by the lanes.
func makespan(durations []float64, lanes int) float64 {
	ends := make([]float64, max(lanes, 1))
	for _, d := range durations {
		first := 0
		for i, e := range ends {
			if e < ends[first] {
				first = i
			}
		}
		ends[first] += d
	}
	return slices.Max(ends)
}

// backfillRate is the rows per second of one backfill of this stream: the
// rate its recent completed backfills reached, capped by rows_per_second.
func (s *Stream) backfillRate(ctx context.Context) (float64, string, error) {
	runs, err := s.st.ListBackfills(ctx, store.BackfillFilter{Stream: s.cfg.Name, Status: StatusCompleted, Limit: recentRuns})
	if err != nil {
		return 0, "", err
	}
	var rows int64
	var secs float64
	for _, b := range runs {
		if b.StartedAt == nil || b.FinishedAt == nil || b.RowsRead == 0 {
			continue
		}
		if d := b.FinishedAt.Sub(*b.StartedAt).Seconds(); d > 0 {
			rows += b.RowsRead
			secs += d
		}
	}
	limit := float64(s.cfg.Backfill.RowsPerSecond)
	switch {
	case secs > 0 && (limit <= 0 || float64(rows)/secs < limit):
		return float64(rows) / secs, "measured: the rate of this stream's recent completed backfills", nil
	case limit > 0:
		return limit, "the stream's backfill.rows_per_second limit", nil
	}
	return 0, "unknown: this stream has no completed backfill to measure from yet", nil
}

// recordEstimate stores the source's row estimate on a run whose first
// chunk was read (estimateOnce), for progress bars; a failure only leaves
// it unknown. Before the run's first chunk is recorded, the estimate goes
// with that record (or the run's end): a write of its own was one more
// sync of the store for each table of a stream of many small ones.
func (m *backfills) recordEstimate(ctx context.Context, rt *runtime, r *run, id change.TableID) {
	if rt.size == nil {
		return
	}
	size, err := rt.size(ctx, id)
	if err != nil || size.Rows < 0 {
		m.log.Debug("no row estimate", logkey.Backfill(r.rec.ID), logkey.Err(err))
		return
	}
	r.mu.Lock()
	r.rec.RowsEstimate = size.Rows
	recorded := r.progressStored // a chunk's record went without it
	r.mu.Unlock()
	if recorded {
		m.persist(r)
	}
}
