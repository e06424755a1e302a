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
	// ComparedBy says how the range was compared: ComparedByChecksums
	// (each server summed it) or ComparedByRows.
	ComparedBy string `json:"compared_by"`
}

// How a range was compared (RangeCheck.ComparedBy).
const (
	ComparedByChecksums = "checksums"
	ComparedByRows      = "rows"
)

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
// destination's rows of the same range. A matching range (the common case)
// costs a hash a row; the rows are keyed only to name the keys that differ.
func checkRange(t *change.Table, low, high change.Key, src, dst []change.Row) RangeCheck {
	rc := RangeCheck{Low: keyText(low), High: keyText(high), SourceRows: len(src), DestRows: len(dst),
		SourceSum: sumOf(src), DestSum: sumOf(dst), ComparedBy: ComparedByRows}
	rc.Match = rc.SourceSum == rc.DestSum && rc.SourceRows == rc.DestRows
	if rc.Match {
		return rc
	}
	sh, dh := rowHashes(t, src), rowHashes(t, dst)
	var diffs []string
	for k, h := range sh {
		if d, ok := dh[k]; !ok || d.sum != h.sum {
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
		h, ok := sh[d]
		if !ok {
			h = dh[d]
		}
		rc.DifferingKeys = append(rc.DifferingKeys, keyText(h.key))
	}
	return rc
}

// hashedRow is a row's hash and key.
type hashedRow struct {
	sum [32]byte
	key change.Key
}

// rowHashes hashes each row's values, keyed by the key's encoding.
func rowHashes(t *change.Table, rows []change.Row) map[string]hashedRow {
	out := make(map[string]hashedRow, len(rows))
	var buf []byte
	for _, r := range rows {
		var h [32]byte
		h, buf = hashRow(buf, r)
		k := t.RowKey(r)
		out[k.Encode()] = hashedRow{sum: h, key: k}
	}
	return out
}

// hashRow hashes r's values (each with its length, so no two rows of
// different values share an input), using buf as scratch space.
func hashRow(buf []byte, r change.Row) ([32]byte, []byte) {
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
	return sha256.Sum256(buf), buf
}

// sumOf combines the rows' hashes independently of their order: the sum
// of each hash's first 64 bits, so that two equal rows do not cancel out
// as they would under XOR.
func sumOf(rows []change.Row) string {
	var acc uint64
	var buf []byte
	for _, r := range rows {
		var h [32]byte
		h, buf = hashRow(buf, r)
		acc += binary.LittleEndian.Uint64(h[:8])
	}
	return hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, acc))
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
// applied, so both sides are taken at the same point of the stream. The
// comparison itself is left to the verify (rangeCompare), off the applier.
func (a *applier) verifyMerged(ctx context.Context, pc *pendingChunk, high change.Key, rows []change.Row) (*rangeCompare, error) {
	if err := a.flushAndWait(ctx); err != nil {
		return nil, err
	}
	t := pc.table
	if a.dest == nil {
		return nil, errors.New("the destination cannot be read back, which verify needs")
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
		return nil, fmt.Errorf("read destination rows of %s: %w", t.ID, err)
	}
	_, events := a.dest.(sink.EventWriter)
	return &rangeCompare{t: t, low: pc.low, high: high, src: rows, dst: dst, cols: pc.scope.Columns, events: events}, nil
}

// rangeCompare is both sides of a verified range, read at the same point
// of the stream, to compare.
type rangeCompare struct {
	t         *change.Table
	low, high change.Key
	src, dst  []change.Row
	cols      []string // the columns compared (nil: all)
	events    bool     // the destination is an event destination
	// summed is a range the servers' sums settled: nothing is left to
	// compare.
	summed *RangeCheck
	// sumsDiffered marks rows read because the range's sums differed.
	sumsDiffered bool
}

// check compares the two sides.
func (c *rangeCompare) check() (RangeCheck, error) {
	if c.summed != nil {
		return *c.summed, nil
	}
	rows := c.src
	if c.events {
		// An event destination gives values back as its events carry
		// them; compare the source's in that form (docs/events.md).
		var err error
		if rows, err = event.ComparableRows(c.t, rows); err != nil {
			return RangeCheck{}, fmt.Errorf("verify %s: %w", c.t.ID, err)
		}
	}
	rows = keepUnresolved(c.t, rows, c.dst)
	rows, dst := project(c.t, rows, c.cols), project(c.t, c.dst, c.cols)
	return checkRange(c.t, c.low, c.high, rows, dst), nil
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
