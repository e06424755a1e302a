package event

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
)

// TableReader answers a destination's reads of one table (what verify
// asks a sink.Reader) from replicas of its events: rows decoded to
// canonical text (DecodeValue), by key range in the source's key order
// (KeyOrder). Events are applied to it as the destination's log grows, so
// successive reads replay only what is new; it keeps a sorted index of
// the replicas' keys, updated by the rows that changed since the last
// read. A log whose chunk marks reset one part's keys (a Kafka partition)
// gives each part a replica of its own.
//
// It holds every row of the table in memory, as JSON, and its key
// decoded.
type TableReader struct {
	t     *change.Table
	cmp   func(a, b change.Key) int
	parts map[int32]*Replica
	index []indexEntry // every row's key, in key order
	keys  map[partKey]change.Key
}

type partKey struct {
	part int32
	enc  string
}

type indexEntry struct {
	partKey
	key change.Key
}

// NewTableReader makes an empty reader of table t; it fails when the
// table's key is of a type whose source order it cannot reproduce.
func NewTableReader(t *change.Table) (*TableReader, error) {
	cmp, err := KeyOrder(t)
	if err != nil {
		return nil, err
	}
	return &TableReader{t: t, cmp: cmp, parts: map[int32]*Replica{}, keys: map[partKey]change.Key{}}, nil
}

// Apply applies one event of part (0 for a log of one part) in order.
func (r *TableReader) Apply(part int32, value []byte) error {
	return r.Part(part).Apply(value)
}

// Part is the replica of one part, which events may be applied to
// directly (a destination's own replay of its files).
func (r *TableReader) Part(part int32) *Replica {
	rep, ok := r.parts[part]
	if !ok {
		names := make([]string, len(r.t.Key))
		for i, c := range r.t.KeyColumns() {
			names[i] = c.Name
		}
		rep = NewReplica(names)
		rep.dirty = map[string]bool{}
		r.parts[part] = rep
	}
	return rep
}

// Len is the number of rows held, over all parts.
func (r *TableReader) Len() int {
	n := 0
	for _, rep := range r.parts {
		n += rep.Len()
	}
	return n
}

// ReadRange returns the rows whose key lies in (low, high], nil bounds
// being open, in key order.
func (r *TableReader) ReadRange(low, high change.Key) ([]change.Row, error) {
	if err := r.sync(); err != nil {
		return nil, err
	}
	i := 0
	if low != nil {
		i = sort.Search(len(r.index), func(i int) bool { return r.cmp(r.index[i].key, low) > 0 })
	}
	var out []change.Row
	for ; i < len(r.index); i++ {
		e := r.index[i]
		if high != nil && r.cmp(e.key, high) > 0 {
			break
		}
		row, err := r.decodeRow(r.parts[e.part].rows[e.enc].after)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// ReadKeys returns the rows with the given keys that the replicas hold.
func (r *TableReader) ReadKeys(keys []change.Key) ([]change.Row, error) {
	cols := r.t.KeyColumns()
	var out []change.Row
	var b strings.Builder
	for _, k := range keys {
		if len(k) != len(cols) {
			return nil, fmt.Errorf("table %s: key of %d values, want %d", r.t.ID, len(k), len(cols))
		}
		b.Reset()
		for i, c := range cols {
			raw, err := appendValue(nil, c, k[i])
			if err != nil {
				return nil, fmt.Errorf("table %s: key column %s: %w", r.t.ID, c.Name, err)
			}
			b.Write(raw)
			b.WriteByte(0)
		}
		for _, rep := range r.parts {
			if row, ok := rep.rows[b.String()]; ok {
				dec, err := r.decodeRow(row.after)
				if err != nil {
					return nil, err
				}
				out = append(out, dec)
				break
			}
		}
	}
	return out, nil
}

// decodeRow reads an "after" object as a row of the table; a column the
// events do not carry (added after they were written) is NULL.
func (r *TableReader) decodeRow(after map[string]json.RawMessage) (change.Row, error) {
	row := make(change.Row, len(r.t.Columns))
	for i, c := range r.t.Columns {
		raw, ok := after[c.Name]
		if !ok {
			row[i] = change.Null
			continue
		}
		v, err := DecodeValue(c, raw)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", r.t.ID, err)
		}
		row[i] = v
	}
	return row, nil
}

func (r *TableReader) decodeKey(after map[string]json.RawMessage) (change.Key, error) {
	cols := r.t.KeyColumns()
	k := make(change.Key, len(cols))
	for i, c := range cols {
		v, err := DecodeValue(c, after[c.Name])
		if err != nil {
			return nil, fmt.Errorf("table %s: key: %w", r.t.ID, err)
		}
		k[i] = v
	}
	return k, nil
}

// sync brings the index up to the replicas: entry by entry for the rows
// that changed since the last read, or rebuilt when many did.
func (r *TableReader) sync() error {
	changed, all := 0, false
	for _, rep := range r.parts {
		changed += len(rep.dirty)
		all = all || rep.dirtyAll
	}
	if changed == 0 && !all {
		return nil
	}
	var err error
	if all || changed > len(r.index)/8+256 {
		err = r.rebuild()
	} else {
		err = r.update()
	}
	for _, rep := range r.parts {
		rep.dirty, rep.dirtyAll = map[string]bool{}, false
	}
	return err
}

func (r *TableReader) rebuild() error {
	r.index, r.keys = r.index[:0], map[partKey]change.Key{}
	for part, rep := range r.parts {
		for enc, row := range rep.rows {
			k, err := r.decodeKey(row.after)
			if err != nil {
				return err
			}
			pk := partKey{part, enc}
			r.keys[pk] = k
			r.index = append(r.index, indexEntry{pk, k})
		}
	}
	sort.SliceStable(r.index, func(i, j int) bool { return r.cmp(r.index[i].key, r.index[j].key) < 0 })
	return nil
}

func (r *TableReader) update() error {
	for part, rep := range r.parts {
		for enc := range rep.dirty {
			pk := partKey{part, enc}
			if k, ok := r.keys[pk]; ok {
				i := r.find(pk, k)
				if i >= 0 {
					r.index = slices.Delete(r.index, i, i+1)
				}
				delete(r.keys, pk)
			}
			row, ok := rep.rows[enc]
			if !ok {
				continue
			}
			k, err := r.decodeKey(row.after)
			if err != nil {
				return err
			}
			r.keys[pk] = k
			i := sort.Search(len(r.index), func(i int) bool { return r.cmp(r.index[i].key, k) > 0 })
			r.index = slices.Insert(r.index, i, indexEntry{pk, k})
		}
	}
	return nil
}

// find is the index position of an entry, -1 when it has none.
func (r *TableReader) find(pk partKey, k change.Key) int {
	i := sort.Search(len(r.index), func(i int) bool { return r.cmp(r.index[i].key, k) >= 0 })
	for ; i < len(r.index) && r.cmp(r.index[i].key, k) == 0; i++ {
		if r.index[i].partKey == pk {
			return i
		}
	}
	return -1
}
