// Package sink defines what a destination does: apply ordered batches of
// changes and backfill chunks idempotently, and commit its checkpoint (the
// source position and every backfill's chunk cursor) in the same transaction
// as the data. Implementations live in subpackages (postgres, sqlite).
//
// Concurrency contract: a Sink is used by one goroutine at a time. Apply
// either commits the whole batch or nothing; after an error the caller may
// retry the same batch, and applying a batch twice has the effect of once.
package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// ErrKeyOrder means a destination cannot compare a table's key in the
// source's order, which chunk ranges need. The object fails with it.
var ErrKeyOrder = errors.New("the destination cannot order this key like the source")

// ErrTableName means a destination cannot hold a table under its names: its
// destination table would be another source table's or tidemark's own, its
// name is taken there by something that is not a table (a view, a type, an
// index), or two of its columns would have one name. The object fails with
// it.
var ErrTableName = errors.New("the destination cannot hold this table under its names")

// ErrRejected marks an Apply error caused by the batch's content (a column
// the destination table lacks, a value its type refuses): retrying the same
// batch cannot succeed, unlike after an outage.
var ErrRejected = errors.New("the destination rejected the batch")

// TableError is a rejection of one table's content (an event over the
// destination's message limit, a value the encoder refuses): the stream
// fails that table's object with Err and goes on with the others, where
// a bare ErrRejected fails the stream. errors.Is(err, ErrRejected) holds.
type TableError struct {
	Table change.TableID
	// Err says what was refused and what to do about it.
	Err error
}

// Rejected is a TableError of table t for err.
func Rejected(t change.TableID, err error) error { return &TableError{Table: t, Err: err} }

func (e *TableError) Error() string { return fmt.Sprintf("table %s: %v", e.Table, e.Err) }

func (e *TableError) Unwrap() []error { return []error{e.Err, ErrRejected} }

// Sink is the core every destination fills: apply ordered batches, read
// the checkpoint they committed, close. What only some destinations can do
// is a capability, found by type assertion: TableCreator, RangeReplacer,
// Reader and Alterer (see Capabilities). An option that needs a capability
// the destination lacks is refused where it is asked (configuration, API).
type Sink interface {
	// Checkpoint reads the committed position and cursors of a stream.
	// A stream that never committed has the zero Checkpoint.
	Checkpoint(ctx context.Context, stream string) (Checkpoint, error)
	// Apply commits a batch, its position and cursors with the data, all
	// or nothing. A chunk's rows are written in key order after the
	// changes before it; a RangeReplacer also replaces the chunk's range.
	Apply(ctx context.Context, b *Batch) error
	Close() error
}

// TableCreator is a destination that holds a table per source table.
type TableCreator interface {
	// EnsureTable creates the destination table for a source table if it
	// does not exist yet (see docs/type-mapping.md).
	EnsureTable(ctx context.Context, t *change.Table) error
}

// RangeReplacer is a destination whose Apply replaces a chunk's key range
// in place: it deletes the range's rows the chunk lacks, and honours Keep
// and UpdateOnly. A filtered or column-subset backfill needs it. The method
// only declares the capability; Apply does the work in its transaction.
type RangeReplacer interface {
	ReplacesRanges()
}

// EventWriter is a destination that writes changes as events
// (internal/event, docs/events.md): the stream gives it the encoder of its
// source type before the first Apply.
type EventWriter interface {
	UseEncoder(*event.Encoder)
}

// Reader is a destination that can be read back, which verify needs.
type Reader interface {
	// ReadRange returns the destination rows of a table whose key lies in
	// (low, high], low nil meaning unbounded below and high nil unbounded
	// above, in the destination's key order, as source text values.
	ReadRange(ctx context.Context, t *change.Table, low, high change.Key) ([]change.Row, error)
	// ReadKeys returns the destination rows of a table with the given keys
	// (those it holds, in no particular order), as ReadRange does. Verify
	// of a filtered backfill uses it.
	ReadKeys(ctx context.Context, t *change.Table, keys []change.Key) ([]change.Row, error)
}

// RangeSummer is a destination that counts and checksums a key range
// itself, as a source of the same SumKind does (source.RangeSummer): verify
// then compares a range without reading its rows, and a backfill skips a
// range that already holds the source's rows.
type RangeSummer interface {
	SumKind() string
	// SumRange returns the row count and checksum of the table's rows
	// whose key lies in (low, high], nil bounds open, as ReadRange
	// bounds it.
	SumRange(ctx context.Context, t *change.Table, low, high change.Key) (rows int, sum string, err error)
}

// SnapshotSummer is a RangeSummer that can take the destination as
// committed now and sum a range of it on a connection of its own, so that
// the stream goes on writing while the sum runs (verify).
type SnapshotSummer interface {
	RangeSummer
	// SumLater takes the snapshot and starts summing t's rows whose key
	// lies in (low, high] in it; wait returns the sum, as SumRange does.
	// Nothing needs to wait for it: the sum ends with ctx at the latest.
	SumLater(ctx context.Context, t *change.Table, low, high change.Key) (wait func(context.Context) (rows int, sum string, err error), err error)
}

// ReplayReader is a Reader that answers from a replay of the events it
// wrote, held in memory between reads (event.TableReader): each read
// replays only what was written since the last. Verify calls EndReads
// when its pass over a table starts and when it ends, so a pass replays
// the log once and nothing is held between passes.
type ReplayReader interface {
	Reader
	// EndReads drops what reads of the table held; the next read
	// replays the table from the start.
	EndReads(id change.TableID)
}

// Capability names what a destination may do beyond the core.
type Capability string

// The capabilities, as messages name them.
const (
	CreateTables  Capability = "create tables"
	ReplaceRanges Capability = "replace key ranges"
	ReadBack      Capability = "be read back"
	AlterTables   Capability = "alter tables"
)

// Capabilities lists what s can do beyond the core, by type assertion; a
// nil pointer of a sink's type answers for the type.
func Capabilities(s Sink) []Capability {
	var out []Capability
	if _, ok := s.(TableCreator); ok {
		out = append(out, CreateTables)
	}
	if _, ok := s.(RangeReplacer); ok {
		out = append(out, ReplaceRanges)
	}
	if _, ok := s.(Reader); ok {
		out = append(out, ReadBack)
	}
	if _, ok := s.(Alterer); ok {
		out = append(out, AlterTables)
	}
	return out
}

// Checkpoint is what a destination committed for one stream.
type Checkpoint struct {
	// Position is the end of the last source transaction applied; replayed
	// transactions ending at or below it are skipped.
	Position change.LSN
	// Resume is the source's own resume token for Position (a MySQL GTID
	// set), opaque to sinks; empty where the position alone is enough, and
	// in checkpoints written before sinks stored it.
	Resume  string
	Cursors map[change.TableID]Cursor
}

// Cursor is a backfill's progress through one table, committed with the data.
type Cursor struct {
	BackfillID int64
	// After is the key of the last row applied; nil before the first chunk.
	After change.Key
	// Done is set when the final chunk was applied.
	Done bool
	// Rows counts rows applied by this backfill so far.
	Rows int64
}

// Batch is an ordered run of operations committed together.
type Batch struct {
	Stream string
	Ops    []Op
	// Position is the source position the stream reached with this batch;
	// it is committed with the data.
	Position change.LSN
	// Resume is the source's resume token for Position, committed with it
	// (see Checkpoint.Resume).
	Resume string
	// Cursors holds the backfill cursors changed in this batch; a cursor with
	// BackfillID 0 removes the table's cursor.
	Cursors map[change.TableID]Cursor
	// BeforeCommit, when set, is called by a ChangeReporter once every op
	// is applied and before the destination commits, with each chunk's
	// Changed filled; an error rolls the batch back.
	BeforeCommit func(ctx context.Context) error
}

// Op is one step of a batch: a row change or a chunk.
type Op struct {
	Change *change.Change
	// Txn is the source transaction Change belongs to (its id, commit
	// position and time): what an event destination writes in the
	// event's source block. Database destinations ignore it.
	Txn   *change.Txn
	Chunk *Chunk
	// Changed, when not nil on a Change, asks a ChangeReporter to note the
	// values of the columns it names in the row before the change (read
	// from the destination) and after it (changes.go).
	Changed *Changes
}

// Chunk replaces the destination rows of a table whose key lies in
// (Low, High] by Rows: rows of the range missing from Rows are deleted
// (unless Keep), the others upserted (or updated, UpdateOnly). Low nil is unbounded below, High nil unbounded above.
// Rows may carry Unchanged values, which keep the destination's value.
type Chunk struct {
	Table *change.Table
	Low   change.Key
	High  change.Key
	Rows  []change.Row
	// Keep leaves the range's destination rows that Rows lacks in place: a
	// filtered or column-subset backfill read only some of the range.
	Keep bool
	// UpdateOnly writes Rows only over rows the destination holds, leaving
	// their Unchanged columns alone; a row it lacks is skipped (a column
	// subset cannot write a whole row).
	UpdateOnly bool
	// BackfillID is the backfill the chunk belongs to, and Last marks its
	// final chunk: an event destination names both in the chunk's mark.
	BackfillID int64
	Last       bool
	// Removed is set by Apply: how many destination rows of the range were
	// deleted because the source no longer has them.
	Removed int64
	// Skipped is set by Apply: how many rows of an UpdateOnly chunk the
	// destination lacked, so were not written.
	Skipped int64
	// Identical is set by Apply: the range already held exactly Rows, so
	// nothing was written (a destination that cannot tell leaves it
	// false). The backfill then tries range sums for its next chunks.
	Identical bool
	// Changed, when not nil, asks a ChangeReporter to note the values of
	// the columns it names in the rows the chunk changes (changes.go).
	Changed *Changes
}

// BinaryChunks is a destination that takes chunk rows whose non-key values
// are in a PostgreSQL source's binary form (change.Value.Binary; see
// internal/pgbinary). Its other ops, and chunks in text, it takes as any
// destination does.
type BinaryChunks interface {
	// TakesBinary reports whether chunks of t may carry binary values. It
	// is called from any goroutine.
	TakesBinary(t *change.Table) bool
}

// Origin is what an event destination writes in the source block of an
// operation's events: its transaction's position, id and commit time,
// or, for a chunk's rows (no transaction), the batch's position at time
// at.
func (b *Batch) Origin(op Op, at time.Time) event.Origin {
	o := event.Origin{Position: b.Position, Resume: b.Resume, CommitTime: at}
	if op.Txn != nil {
		o.Position, o.Xid, o.CommitTime = op.Txn.CommitLSN, op.Txn.Xid, op.Txn.CommitTime
	}
	return o
}
