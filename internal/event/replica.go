package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// Replica is the reference consumer: it applies one table's events in
// order and holds the rows they leave, as a consumer of a log or file
// destination would (docs/events.md). Rows stay in their event form (the
// "after" object), so a test compares them with the source's rows encoded
// the same way.
//
// Key ranges of chunk marks compare key values as JSON: numbers
// numerically, strings by their bytes; so marks are followed exactly for
// integer keys and keys whose source order is byte order.
type Replica struct {
	keyCols []string
	rows    map[string]replicaRow
	// sent holds the keys of "r" events since the table's last chunk mark.
	sent map[string]bool
	// dirty, when a TableReader follows the replica, holds the keys whose
	// row changed since it last looked, and dirtyAll says that all may
	// have (a truncate).
	dirty    map[string]bool
	dirtyAll bool
}

// A Watch sees each event value a reader applies to a replica, in the
// order it applies them (a topic's in each partition's order), so that a
// test can follow one key's events as well as the rows they leave. The
// value is only valid during the call.
type Watch func(value []byte)

type replicaRow struct {
	key   []any
	after map[string]json.RawMessage
}

// NewReplica makes an empty replica of a table with these key columns.
func NewReplica(keyCols []string) *Replica {
	return &Replica{keyCols: keyCols, rows: map[string]replicaRow{}, sent: map[string]bool{}}
}

type envelopeIn struct {
	Before map[string]json.RawMessage `json:"before"`
	After  json.RawMessage            `json:"after"`
	Op     string                     `json:"op"`
	Chunk  *struct {
		Low   map[string]json.RawMessage `json:"low"`
		High  map[string]json.RawMessage `json:"high"`
		Reset bool                       `json:"reset"`
	} `json:"chunk"`
}

// Apply applies one event value; a nil value (a tombstone) changes
// nothing.
func (r *Replica) Apply(value []byte) error {
	if value == nil {
		return nil
	}
	var e envelopeIn
	if err := json.Unmarshal(value, &e); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	switch e.Op {
	case OpCreate, OpUpdate, OpRead:
		var after map[string]json.RawMessage
		if err := json.Unmarshal(e.After, &after); err != nil || after == nil {
			return fmt.Errorf("%s event without an after row", e.Op)
		}
		k, enc, err := r.key(after)
		if err != nil {
			return err
		}
		// An unchanged out-of-line value keeps the value held.
		for col, v := range after {
			if string(v) == unavailableJSON || string(v) == unavailableBase64JSON {
				after[col] = r.rows[enc].after[col]
			}
		}
		r.rows[enc] = replicaRow{key: k, after: after}
		r.touch(enc)
		if e.Op == OpRead {
			r.sent[enc] = true
		}
	case OpDelete:
		_, enc, err := r.key(e.Before)
		if err != nil {
			return err
		}
		delete(r.rows, enc)
		r.touch(enc)
	case OpTruncate:
		r.rows = map[string]replicaRow{}
		r.dirtyAll = true
	case OpChunk:
		if e.Chunk == nil {
			return fmt.Errorf("chunk mark without its chunk")
		}
		if e.Chunk.Reset {
			if err := r.reset(e.Chunk.Low, e.Chunk.High); err != nil {
				return err
			}
		}
		r.sent = map[string]bool{}
	default:
		return fmt.Errorf("event with op %q", e.Op)
	}
	return nil
}

// reset drops the rows of (low, high] the chunk did not send.
func (r *Replica) reset(low, high map[string]json.RawMessage) error {
	var lo, hi []any
	var err error
	if low != nil {
		if lo, _, err = r.key(low); err != nil {
			return err
		}
	}
	if high != nil {
		if hi, _, err = r.key(high); err != nil {
			return err
		}
	}
	for enc, row := range r.rows {
		if r.sent[enc] || (lo != nil && compareKeys(row.key, lo) <= 0) || (hi != nil && compareKeys(row.key, hi) > 0) {
			continue
		}
		delete(r.rows, enc)
		r.touch(enc)
	}
	return nil
}

// touch notes a changed row for a TableReader, when one follows.
func (r *Replica) touch(enc string) {
	if r.dirty != nil {
		r.dirty[enc] = true
	}
}

// key reads the key columns of a row object: the values, and a string
// that is the same for the same key.
func (r *Replica) key(obj map[string]json.RawMessage) ([]any, string, error) {
	vals := make([]any, len(r.keyCols))
	var b strings.Builder
	for i, c := range r.keyCols {
		raw, ok := obj[c]
		if !ok {
			return nil, "", fmt.Errorf("row without key column %q", c)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&vals[i]); err != nil {
			return nil, "", fmt.Errorf("key column %q: %w", c, err)
		}
		b.Write(raw)
		b.WriteByte(0)
	}
	return vals, b.String(), nil
}

func compareKeys(a, b []any) int {
	for i := range a {
		if c := compareValue(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func compareValue(a, b any) int {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		x, _ := new(big.Float).SetString(an.String())
		y, _ := new(big.Float).SetString(bn.String())
		if x != nil && y != nil {
			return x.Cmp(y)
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

var (
	unavailableJSON       = `"` + Unavailable + `"`
	unavailableBase64JSON = `"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="`
)

// Rows returns the replica's rows (their "after" objects, column by
// column), in key order.
func (r *Replica) Rows() []map[string]json.RawMessage {
	rows := make([]replicaRow, 0, len(r.rows))
	for _, row := range r.rows {
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return compareKeys(rows[i].key, rows[j].key) < 0 })
	out := make([]map[string]json.RawMessage, len(rows))
	for i, row := range rows {
		out[i] = row.after
	}
	return out
}

// Len is the number of rows the replica holds.
func (r *Replica) Len() int { return len(r.rows) }

// Merge adds the rows of other, a replica of the same table fed other
// keys' events (another partition of a topic), to r.
func (r *Replica) Merge(other *Replica) {
	for k, row := range other.rows {
		r.rows[k] = row
		r.touch(k)
	}
}
