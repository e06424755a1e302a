// Package event writes changes as the events a log or file destination
// carries: the payload Debezium's JSON converter writes with
// schemas.enable=false (before, after, source, op, ts_ms), the row key as
// the message key, tombstones after deletes, backfill rows as op "r" with
// source.snapshot "incremental", and a control event after each backfill
// chunk naming its key range (docs/events.md documents every field).
//
// The encoder knows sources only through Origin and the fields their
// registry entry gives (source.Type.EventFields); values are encoded by
// their column's neutral tag.
package event

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// Ops, as Debezium names them.
const (
	OpCreate   = "c"
	OpUpdate   = "u"
	OpDelete   = "d"
	OpRead     = "r"
	OpTruncate = "t"
	// OpChunk is tidemark's control event after a backfill chunk.
	OpChunk = "tidemark.chunk"
)

// Field is one source-specific field of an event's source block, in the
// order written.
type Field struct {
	Name  string
	Value any // string, int64, uint64, uint32, bool or nil
}

// Origin is where a change was read: what the source block says.
type Origin struct {
	Position   change.LSN
	Xid        uint32
	Resume     string // the source's resume token after the change (GTIDs)
	CommitTime time.Time
	// Backfill is set for rows a backfill read (op "r").
	Backfill bool
}

// Encoder writes a stream's changes as events.
type Encoder struct {
	// Connector is the source block's connector: "postgresql", "mysql".
	Connector string
	// Name is the stream's name (Debezium's topic.prefix).
	Name string
	// DB is the source database's name.
	DB string
	// SchemaField says whether the source block carries "schema"
	// (PostgreSQL) or names the table's schema "db" (MySQL).
	SchemaField bool
	// Fields gives the source's own fields for an origin: PostgreSQL's
	// txId and lsn, MySQL's file, pos, gtid.
	Fields func(Origin) []Field
	// Tombstones adds a message with the key and no value after each
	// delete, for compacted topics.
	Tombstones bool
	// Version is written as source.version.
	Version string
	// Now is the clock for ts_ms; nil is time.Now.
	Now func() time.Time
}

// Message is one event as a destination writes it: Key and Value are
// JSON; a nil Value is a tombstone; a nil Key is an event without a row
// key (truncate).
type Message struct {
	Table change.TableID
	Key   []byte
	Value []byte
}

// Change writes one row change: an insert as "c", an update as "u", an
// update that moved the key as a delete of the old key (and its
// tombstone) and a "c" of the new one, as Debezium does, a delete as "d"
// whose before holds the key, and a truncate as "t".
func (e *Encoder) Change(c *change.Change, o Origin) ([]Message, error) {
	t := c.Table
	switch c.Kind {
	case change.Insert:
		m, err := e.rowEvent(t, OpCreate, c.Row, o)
		return []Message{m}, err
	case change.Update:
		if c.OldKey == nil {
			m, err := e.rowEvent(t, OpUpdate, c.Row, o)
			return []Message{m}, err
		}
		del, err := e.deleteEvent(t, c.OldKey, o)
		if err != nil {
			return nil, err
		}
		ins, err := e.rowEvent(t, OpCreate, c.Row, o)
		return append(del, ins), err
	case change.Delete:
		return e.deleteEvent(t, c.OldKey, o)
	case change.Truncate:
		v, err := e.envelope(t, OpTruncate, nil, nil, o)
		return []Message{{Table: t.ID, Value: v}}, err
	}
	return nil, fmt.Errorf("event: change of kind %s", c.Kind)
}

// Row writes one row a backfill read, as op "r" (source.snapshot
// "incremental").
func (e *Encoder) Row(t *change.Table, r change.Row, o Origin) (Message, error) {
	o.Backfill = true
	return e.rowEvent(t, OpRead, r, o)
}

// Head is an event without its row images and key: what a format that
// encodes before and after from the row's values (Parquet) takes instead
// of the event's JSON.
type Head struct {
	Op     string
	Source []byte // the source block, as the event's JSON has it (read only: the writer keeps it)
	TsMs   int64
	// Frame is the length of the event's JSON less its after's (Row's
	// event's length is Frame plus AppendRow's).
	Frame int
}

// RowHead is the head of the event Row writes for a row of t, for every
// row of a chunk at once.
func (e *Encoder) RowHead(t *change.Table, o Origin) (Head, error) {
	o.Backfill = true
	src, err := e.appendSource(nil, t.ID, o)
	if err != nil {
		return Head{}, err
	}
	h := Head{Op: OpRead, Source: src, TsMs: e.now().UnixMilli()}
	frame, err := e.envelopeAt(t, OpRead, nil, nil, o, h.TsMs) // after: null
	if err != nil {
		return Head{}, err
	}
	h.Frame = len(frame) - len("null")
	return h, nil
}

func (e *Encoder) rowEvent(t *change.Table, op string, r change.Row, o Origin) (Message, error) {
	key, err := keyJSON(t, t.RowKey(r))
	if err != nil {
		return Message{}, err
	}
	after, err := rowJSON(t, r)
	if err != nil {
		return Message{}, err
	}
	v, err := e.envelope(t, op, nil, after, o)
	return Message{Table: t.ID, Key: key, Value: v}, err
}

func (e *Encoder) deleteEvent(t *change.Table, k change.Key, o Origin) ([]Message, error) {
	key, err := keyJSON(t, k)
	if err != nil {
		return nil, err
	}
	// Before holds what the log carries of the old row: its key, as
	// Debezium's with PostgreSQL's default replica identity.
	v, err := e.envelope(t, OpDelete, key, nil, o)
	if err != nil {
		return nil, err
	}
	out := []Message{{Table: t.ID, Key: key, Value: v}}
	if e.Tombstones {
		out = append(out, Message{Table: t.ID, Key: key})
	}
	return out, nil
}

// envelope writes {"before":…,"after":…,"source":{…},"op":…,"ts_ms":…}.
func (e *Encoder) envelope(t *change.Table, op string, before, after []byte, o Origin) ([]byte, error) {
	return e.envelopeAt(t, op, before, after, o, e.now().UnixMilli())
}

// envelopeAt is envelope with ts_ms tsMs.
func (e *Encoder) envelopeAt(t *change.Table, op string, before, after []byte, o Origin, tsMs int64) ([]byte, error) {
	b := make([]byte, 0, 256+len(before)+len(after))
	b = append(b, `{"before":`...)
	b = appendRaw(b, before)
	b = append(b, `,"after":`...)
	b = appendRaw(b, after)
	b = append(b, `,"source":`...)
	b, err := e.appendSource(b, t.ID, o)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"op":`...)
	b = appendString(b, op)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, tsMs, 10)
	return append(b, '}'), nil
}

func appendRaw(b, raw []byte) []byte {
	if raw == nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

func (e *Encoder) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// appendSource writes the source block: Debezium's common fields, then
// the source's own.
func (e *Encoder) appendSource(b []byte, id change.TableID, o Origin) ([]byte, error) {
	b = append(b, `{"version":`...)
	b = appendString(b, e.Version)
	b = append(b, `,"connector":`...)
	b = appendString(b, e.Connector)
	b = append(b, `,"name":`...)
	b = appendString(b, e.Name)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, o.CommitTime.UnixMilli(), 10)
	b = append(b, `,"snapshot":`...)
	if o.Backfill {
		b = appendString(b, "incremental")
	} else {
		b = appendString(b, "false")
	}
	b = append(b, `,"db":`...)
	if e.SchemaField {
		b = appendString(b, e.DB)
		b = append(b, `,"schema":`...)
	}
	b = appendString(b, id.Schema)
	b = append(b, `,"table":`...)
	b = appendString(b, id.Name)
	if e.Fields != nil {
		for _, f := range e.Fields(o) {
			b = append(b, ',')
			b = appendString(b, f.Name)
			b = append(b, ':')
			var err error
			if b, err = appendAny(b, f.Value); err != nil {
				return nil, fmt.Errorf("source field %s: %w", f.Name, err)
			}
		}
	}
	return append(b, '}'), nil
}

func appendAny(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	}
	return nil, fmt.Errorf("value of type %T", v)
}

// RowObject is a row as an event's after carries it; KeyObject a key as
// a delete's before and the message key carry it. Readers of files that
// store values by type (Parquet) rebuild events with them.
func RowObject(t *change.Table, r change.Row) ([]byte, error) { return rowJSON(t, r) }

// KeyObject: see RowObject.
func KeyObject(t *change.Table, k change.Key) ([]byte, error) { return keyJSON(t, k) }

// keyJSON writes a key as the message key: {"col":value,…} in key order.
func keyJSON(t *change.Table, k change.Key) ([]byte, error) {
	cols := t.KeyColumns()
	if len(k) != len(cols) {
		return nil, fmt.Errorf("table %s: key of %d values, want %d", t.ID, len(k), len(cols))
	}
	return object(cols, k)
}

// rowJSON writes a row as {"col":value,…} in column order.
func rowJSON(t *change.Table, r change.Row) ([]byte, error) {
	return AppendRow(nil, t, r)
}

// AppendRow appends r, a row of t, as an event's after holds it, to b;
// it refuses a row of the wrong length and a value Row cannot write.
func AppendRow(b []byte, t *change.Table, r change.Row) ([]byte, error) {
	if len(r) != len(t.Columns) {
		return nil, fmt.Errorf("table %s: row of %d values, want %d", t.ID, len(r), len(t.Columns))
	}
	return appendObject(b, t.Columns, r)
}

func object(cols []change.Column, vals []change.Value) ([]byte, error) {
	return appendObject(nil, cols, vals)
}

func appendObject(b []byte, cols []change.Column, vals []change.Value) ([]byte, error) {
	b = append(b, '{')
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, c.Name)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, c, vals[i]); err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
	}
	return append(b, '}'), nil
}

// ChunkMark describes a backfill chunk that was just written, for its
// control event.
type ChunkMark struct {
	BackfillID int64
	// Low and High bound the chunk's key range (Low, High]; nil is
	// unbounded.
	Low, High change.Key
	// Rows is how many "r" events the chunk sent, just before the mark.
	Rows int
	// Reset is set when the chunk read the whole range: a consumer drops
	// the range's keys that the chunk did not send. A filtered or
	// column-subset backfill's chunk is no reset.
	Reset bool
	// Last is set on the backfill's final chunk.
	Last bool
}

// Chunk writes the control event after a chunk's rows: op
// "tidemark.chunk", with a "chunk" object naming the backfill, the key
// range and the row count; its key names the backfill and the range's
// high bound, one key per chunk.
func (e *Encoder) Chunk(t *change.Table, m ChunkMark, o Origin) (Message, error) {
	o.Backfill = true
	high := []byte("null")
	if m.High != nil {
		var err error
		if high, err = keyJSON(t, m.High); err != nil {
			return Message{}, fmt.Errorf("chunk high bound: %w", err)
		}
	}
	key := append([]byte(`{"tidemark.backfill":`+strconv.FormatInt(m.BackfillID, 10)+`,"high":`), high...)
	key = append(key, '}')
	v, err := e.envelope(t, OpChunk, nil, nil, o)
	if err != nil {
		return Message{}, err
	}
	b := append(v[:len(v)-1:len(v)-1], `,"chunk":{"backfill":`...)
	b = strconv.AppendInt(b, m.BackfillID, 10)
	for _, bound := range []struct {
		name string
		k    change.Key
	}{{"low", m.Low}, {"high", m.High}} {
		b = append(b, `,"`+bound.name+`":`...)
		if bound.k == nil {
			b = append(b, "null"...)
			continue
		}
		kb, err := keyJSON(t, bound.k)
		if err != nil {
			return Message{}, fmt.Errorf("chunk %s bound: %w", bound.name, err)
		}
		b = append(b, kb...)
	}
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, int64(m.Rows), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendBool(b, m.Reset)
	b = append(b, `,"last":`...)
	b = strconv.AppendBool(b, m.Last)
	b = append(b, "}}"...)
	return Message{Table: t.ID, Key: key, Value: b}, nil
}
