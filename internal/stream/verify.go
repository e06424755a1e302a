package stream

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// RangeCheck compares one key range of an object in source and destination
// at the same point of the stream.
type RangeCheck struct {
	Low           []string   `json:"low,omitempty"`  // exclusive; empty is unbounded
	High          []string   `json:"high,omitempty"` // inclusive; empty is unbounded
	SourceRows    int        `json:"source_rows"`
	DestRows      int        `json:"destination_rows"`
	SourceSum     string     `json:"source_checksum"`
	DestSum       string     `json:"destination_checksum"`
	Match         bool       `json:"match"`
	DifferingKeys [][]string `json:"differing_keys,omitempty"` // a few keys that differ
}

// ObjectCheck is the verify result of one object.
type ObjectCheck struct {
	Object     string       `json:"object"`
	SourceRows int          `json:"source_rows"`
	DestRows   int          `json:"destination_rows"`
	Match      bool         `json:"match"`
	Ranges     []RangeCheck `json:"ranges"`
	Error      string       `json:"error,omitempty"`
	// Repair is the backfill re-reading the differing ranges, when a
	// repair was asked and some differ.
	Repair *store.Backfill `json:"repair,omitempty"`

	id change.TableID
}

// checkRange compares the merged source rows of a range with the
// destination's rows of the same range.
func checkRange(t *change.Table, low, high change.Key, src, dst []change.Row) RangeCheck {
	keys := map[string][]string{}
	sh := rowHashes(t, src, keys)
	dh := rowHashes(t, dst, keys)
	rc := RangeCheck{Low: keyText(low), High: keyText(high), SourceRows: len(src), DestRows: len(dst),
		SourceSum: sumOf(sh), DestSum: sumOf(dh)}
	rc.Match = rc.SourceSum == rc.DestSum && rc.SourceRows == rc.DestRows
	if rc.Match {
		return rc
	}
	var diffs []string
	for k, h := range sh {
		if dh[k] != h {
			diffs = append(diffs, k)
		}
	}
	for k := range dh {
		if _, ok := sh[k]; !ok {
			diffs = append(diffs, k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 10 {
		diffs = diffs[:10]
	}
	for _, d := range diffs {
		rc.DifferingKeys = append(rc.DifferingKeys, keys[d])
	}
	return rc
}

// rowHashes hashes each row's values, keyed by the key's encoding; keys
// collects each key's text values for reports.
func rowHashes(t *change.Table, rows []change.Row, keys map[string][]string) map[string][32]byte {
	out := make(map[string][32]byte, len(rows))
	var buf []byte
	for _, r := range rows {
		buf = buf[:0]
		for _, v := range r {
			if v.Null {
				buf = append(buf, 0)
				continue
			}
			buf = append(buf, 1)
			buf = binary.AppendUvarint(buf, uint64(len(v.Text)))
			buf = append(buf, v.Text...)
		}
		k := t.RowKey(r)
		enc := k.Encode()
		keys[enc] = keyText(k)
		out[enc] = sha256.Sum256(buf)
	}
	return out
}

// sumOf combines row hashes independently of order.
func sumOf(hs map[string][32]byte) string {
	var acc [32]byte
	for _, h := range hs {
		for i := range acc {
			acc[i] ^= h[i]
		}
	}
	return hex.EncodeToString(acc[:8])
}

func keyText(k change.Key) []string {
	if k == nil {
		return nil
	}
	out := make([]string, len(k))
	for i, v := range k {
		out[i] = v.String()
	}
	return out
}

// verifyMerged runs in the applier: it commits everything before the
// chunk's point, then reads the destination's range while nothing else is
// applied, so both sides are taken at the same point of the stream.
func (a *applier) verifyMerged(ctx context.Context, pc *pendingChunk, high change.Key, rows []change.Row) (RangeCheck, error) {
	if err := a.flushAndWait(ctx); err != nil {
		return RangeCheck{}, err
	}
	t := pc.table
	if a.dest == nil {
		return RangeCheck{}, errors.New("the destination cannot be read back, which verify needs")
	}
	if rr, ok := a.dest.(sink.ReplayReader); ok {
		if pc.passStart {
			rr.EndReads(t.ID)
		}
		if pc.passEnd {
			defer rr.EndReads(t.ID)
		}
	}
	var dst []change.Row
	var err error
	if pc.scope.Filter != nil {
		// Only the rows the filter selected: the range may span most of
		// the destination's table.
		keys := make([]change.Key, len(rows))
		for i, r := range rows {
			keys[i] = t.RowKey(r)
		}
		dst, err = a.dest.ReadKeys(ctx, t, keys)
	} else {
		dst, err = a.dest.ReadRange(ctx, t, pc.low, high)
	}
	if err != nil {
		return RangeCheck{}, fmt.Errorf("read destination rows of %s: %w", t.ID, err)
	}
	if _, ok := a.dest.(sink.EventWriter); ok {
		// An event destination gives values back as its events carry
		// them; compare the source's in that form (docs/events.md).
		if rows, err = event.ComparableRows(t, rows); err != nil {
			return RangeCheck{}, fmt.Errorf("verify %s: %w", t.ID, err)
		}
	}
	rows = keepUnresolved(t, rows, dst)
	rows, dst = project(t, rows, pc.scope.Columns), project(t, dst, pc.scope.Columns)
	return checkRange(t, pc.low, high, rows, dst), nil
}

// ErrNotRunning is returned for work that needs the stream running.
var ErrNotRunning = fmt.Errorf("the stream is not running: start it (or resume it) first")

// Verify compares objects in source and destination, range by range of
// chunkSize rows (0: the stream's chunk size). Each range is read from the
// source in a snapshot, reconciled with the changes committed around it, and
// compared with the destination at that same point of the stream, so live
// changes do not make the two disagree.
func (s *Stream) Verify(ctx context.Context, ids []change.TableID, chunkSize int) ([]ObjectCheck, error) {
	if msg := sink.Refusal(s.cfg.Destination.Type, sink.ReadBack, "verify", "compare the destination with the source by other means"); msg != "" {
		return nil, &InvalidError{Msg: msg}
	}
	s.bf.mu.Lock()
	rt := s.bf.rt
	s.bf.mu.Unlock()
	if rt == nil {
		return nil, ErrNotRunning
	}
	if chunkSize <= 0 {
		chunkSize = s.cfg.Backfill.ChunkSize
	}
	if len(ids) == 0 {
		for id := range s.Tables() {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	}
	var out []ObjectCheck
	for _, id := range ids {
		t := rt.tables(id)
		if t == nil {
			out = append(out, ObjectCheck{Object: config.FormatTable(id), Error: "not a streamed object of " + s.cfg.Name})
			continue
		}
		oc, err := verifyObject(ctx, rt, t, chunkSize, nil, chunkSpec{})
		if err != nil {
			return out, err
		}
		out = append(out, oc)
	}
	return out, nil
}

// verifyObject verifies ranges of a table (nil: the whole table), in
// ranges of chunkSize rows, reading the source with scope's filter and
// columns and comparing only what they cover. A read that runs into the
// source's statement timeout is read again at half the size, down to
// timeoutFloor, as a backfill's is.
func verifyObject(ctx context.Context, rt *runtime, t *change.Table, chunkSize int, ranges []keyRange, scope chunkSpec) (ObjectCheck, error) {
	oc := ObjectCheck{Object: config.FormatTable(t.ID), Match: true, id: t.ID}
	floor := timeoutFloor(chunkSize)
	if ranges == nil {
		ranges = []keyRange{{}}
	}
	started := false
	for n, rg := range ranges {
		after := rg.Low
		for {
			pc := &pendingChunk{table: t, low: after, verify: true, scope: scope, passStart: !started}
			if err := rt.applier.register(ctx, pc); err != nil {
				return oc, err
			}
			spec := scope
			spec.After, spec.Upto, spec.Limit = after, rg.High, chunkSize
			read, err := rt.src.ReadChunk(ctx, t, spec)
			if err != nil {
				rt.applier.abandon(pc)
				if source.IsStatementTimeout(err) && chunkSize > floor {
					chunkSize = max(floor, chunkSize/2)
					continue
				}
				return oc, fmt.Errorf("verify %s: %w", t.ID, err)
			}
			pc.read, pc.upto, pc.ends = read, rg.High, len(read.Rows) < chunkSize
			pc.passEnd = pc.ends && n == len(ranges)-1
			res, err := rt.applier.submit(ctx, pc)
			if err != nil {
				return oc, fmt.Errorf("verify %s: %w", t.ID, err)
			}
			started = true
			if res.Retry {
				continue
			}
			oc.Ranges = append(oc.Ranges, *res.Check)
			oc.SourceRows += res.Check.SourceRows
			oc.DestRows += res.Check.DestRows
			oc.Match = oc.Match && res.Check.Match
			if pc.ends {
				break
			}
			after = res.High
		}
	}
	return oc, nil
}
