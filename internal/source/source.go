// Package source is the contract every source of changes fills (PostgreSQL
// today; see docs/sources.md), and the registry of source types.
//
// A stream knows its source only through Source: it lists and describes
// tables, prepares what the log needs to carry their changes (a
// publication, say), keeps the log retained for it (a replication slot),
// streams committed transactions from a position and is told which
// positions the destination committed, and reads backfill chunks together
// with what the merge needs to decide which window changes apply to them.
//
// Positions are change.LSN values: ordered numbers each source encodes
// itself and writes in its own notation (Type.FormatPosition) wherever a
// person reads them. A source may add a resume token of its own to each
// position (Resumer; MySQL's GTID state), committed beside it.
//
// Concurrency contract: Stream runs in one goroutine and returns when its
// context ends or its connection fails, and the caller reconnects. Every
// other method may be called from any goroutine.
package source

import (
	"context"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
)

// Source is one source database as a stream uses it.
type Source interface {
	Catalog
	Capture
	Log
	Reader
	// Close releases the source's connections.
	Close()
}

// Catalog describes the source's tables.
type Catalog interface {
	// Tables lists the tables a stream could include.
	Tables(ctx context.Context) ([]change.TableID, error)
	// Describe reads one table's shape; keyCols names the key columns
	// configured for it (nil: the table's own key). A table without a
	// usable key is ErrNoKey.
	Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error)
	// Attributes reads a table's columns as the catalog holds them now,
	// dropped ones included, by column number: what schema changes are
	// judged by.
	Attributes(ctx context.Context, id change.TableID) (map[int16]Attribute, error)
	// EstimateTable sizes a table as a backfill of it would read it.
	EstimateTable(ctx context.Context, id change.TableID) (TableSize, error)
}

// ManyDescriber is a Catalog that describes several tables at once, in a
// few queries for all of them: a stream's start describes every table.
type ManyDescriber interface {
	// DescribeMany describes each of ids as Describe does, keys[id] its
	// configured key columns. Unless err (one that failed them all),
	// tables and errs are as long as ids, and tables[i] is nil exactly
	// when errs[i], table i's own error, is not.
	DescribeMany(ctx context.Context, ids []change.TableID, keys map[change.TableID][]string) (tables []*change.Table, errs []error, err error)
}

// Capture is what makes the log carry a table's changes.
type Capture interface {
	// PrepareCapture makes the log carry the changes of exactly these
	// tables (PostgreSQL: creates the publication or sets its tables).
	PrepareCapture(ctx context.Context, tables []change.TableID) error
	// Captures reports whether the log carries the table's changes.
	Captures(ctx context.Context, id change.TableID) (bool, error)
	// AddCapture makes the log carry one more table's changes.
	AddCapture(ctx context.Context, id change.TableID) error
}

// Log is the source's change log as the stream holds it.
type Log interface {
	// LogState reads what the source retains for the stream.
	LogState(ctx context.Context) (LogState, error)
	// EnsureLog creates what retains the log for the stream (PostgreSQL:
	// the replication slot) when it is missing; it reports whether it
	// created it. It runs before the stream reports itself running: a
	// stream starting over streams every change committed after it
	// (MySQL pins the binlog's end here).
	EnsureLog(ctx context.Context) (bool, error)
	// DropLog removes it, if it exists.
	DropLog(ctx context.Context) error
	// Stream sends committed transactions from start, in commit order, and
	// progress to out. It returns when ctx ends (with ctx's error) or the
	// connection fails; errors that need a person are PermanentError. It
	// never closes out.
	Stream(ctx context.Context, start change.LSN, lookup TableLookup, out chan<- change.Event) error
	// Confirm records that the destination committed everything up to
	// pos: the source may then release the log before it.
	Confirm(pos change.LSN)
	// WantPosition asks the stream to report progress until it has passed
	// pos (a pending chunk waits for it).
	WantPosition(pos change.LSN)
}

// SnapshotExporter is a Log that can create what retains the log together
// with a snapshot of the source exactly at the log's start (PostgreSQL: a
// replication slot created with EXPORT_SNAPSHOT). Rows read in it reflect
// every transaction the log will not carry and none it will, so a first
// start's load read in it needs no window merge while nothing streamed is
// applied (docs/backfill.md, "The initial load in the slot's snapshot").
type SnapshotExporter interface {
	// ExportLog creates the log's retention, which must be missing, and
	// exports the snapshot. The Export holds the snapshot (and the
	// source's cleanup horizon) until it is closed.
	ExportLog(ctx context.Context) (*Export, error)
	// ReadChunkIn reads as ReadChunk does, in exp's snapshot; the chunk's
	// position is exp.Position. A table the snapshot cannot show as it is
	// now (created, rewritten or truncated since) is ErrNotInSnapshot.
	ReadChunkIn(ctx context.Context, exp *Export, t *change.Table, opt ReadOptions) (Chunk, error)
}

// Export is a snapshot a SnapshotExporter exported: valid until Close.
type Export struct {
	// Name is the source's name of the snapshot.
	Name string
	// Position is the log's start: the snapshot sees exactly the
	// transactions committed before it.
	Position change.LSN
	close    func()
	once     sync.Once
}

// NewExport is an export that close releases.
func NewExport(name string, pos change.LSN, close func()) *Export {
	return &Export{Name: name, Position: pos, close: close}
}

// Close releases the snapshot; later reads in it fail. It may be called
// more than once.
func (e *Export) Close() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		if e.close != nil {
			e.close()
		}
	})
}

// Resumer is a Log whose positions come with a resume token of the
// source's own (MySQL: the GTID state), which the destination commits
// beside each position (sink.Checkpoint.Resume) and change.Event carries.
type Resumer interface {
	// ResumeFrom is told the checkpoint the stream resumes from (position
	// and token; 0 and "" for a stream starting over) before LogState and
	// Stream, and before any chunk is read: the source may renumber the
	// positions it reports from then on, keeping them ordered after pos.
	ResumeFrom(ctx context.Context, pos change.LSN, token string) error
}

// ResumeFrom tells src the checkpoint, if it is a Resumer.
func ResumeFrom(ctx context.Context, src Log, pos change.LSN, token string) error {
	if r, ok := src.(Resumer); ok {
		return r.ResumeFrom(ctx, pos, token)
	}
	return nil
}

// Reader reads rows for backfills and verifies.
type Reader interface {
	// ReadChunk reads up to Limit rows with key in (After, Upto], in key
	// order, in one snapshot, returned with the rows together with the
	// position that frames it. It writes nothing to the source.
	ReadChunk(ctx context.Context, t *change.Table, opt ReadOptions) (Chunk, error)
	// CheckFilter says whether a backfill's filter is a valid condition on
	// the table: a *rowfilter.Error for a column the table lacks, ErrFilter
	// when the source refused it.
	CheckFilter(ctx context.Context, t *change.Table, filter *rowfilter.Filter) error
	// InRange reports, for each key, whether the source orders it within
	// (low, high] (nil bounds are open).
	InRange(ctx context.Context, t *change.Table, keys []change.Key, low, high change.Key) ([]bool, error)
	// ReadGenerated reads generated columns' values (cols, indexes into
	// t.Columns) of the rows with keys, as of the transaction xid or
	// later; visible is false when that transaction is not yet visible.
	ReadGenerated(ctx context.Context, t *change.Table, cols []int, keys []change.Key, xid uint32) (vals [][]change.Value, visible bool, err error)
}

// KeyOrderer is a Reader that knows, for some tables, the order of their
// keys without asking the source: a stream then lets live changes outside
// a chunk's key range commit while the chunk is written (sink.ChunkLaner).
type KeyOrderer interface {
	// KeyCompare returns a comparison of t's keys that matches the
	// source's order of them, or nil when only the source knows it (a
	// collation, a numeric).
	KeyCompare(t *change.Table) func(a, b change.Key) int
}

// TableLookup returns the described table for a source table, or nil when
// the table is not streamed.
type TableLookup func(change.TableID) *change.Table

// Snapshot is what the merge needs of the snapshot a chunk was read in.
type Snapshot interface {
	// VisibleXid reports whether a committed transaction is visible.
	VisibleXid(xid uint32) bool
	// Widen turns a 32-bit xid into the 64-bit id near the snapshot's.
	Widen(xid uint32) uint64
	// Horizon is the snapshot's xmin: transactions below it are finished
	// and visible to every later snapshot.
	Horizon() uint64
}

// PositionSnapshot is a Snapshot whose rule is a log position: the rows
// reflect exactly the transactions committed at or before it (MySQL and
// MariaDB: the binlog position of a consistent snapshot). Such a source's
// VisibleXid answers for the transactions the stream applied before the
// chunk was registered, which the position rule says are all visible.
type PositionSnapshot interface {
	Snapshot
	// SeesCommit reports whether the transaction committed at commit is
	// reflected in the rows.
	SeesCommit(commit change.LSN) bool
}

// Sees reports whether a chunk read in snap reflects the transaction xid
// that committed at commit: by position when the snapshot has one, else by
// transaction id.
func Sees(snap Snapshot, xid uint32, commit change.LSN) bool {
	if p, ok := snap.(PositionSnapshot); ok {
		return p.SeesCommit(commit)
	}
	return snap.VisibleXid(xid)
}

// Chunk is a run of rows read in key order inside one snapshot, with the
// log position that frames it.
type Chunk struct {
	Rows []change.Row
	// Snapshot is the snapshot the rows were read in: a transaction
	// visible in it is reflected in Rows, any other is not.
	Snapshot Snapshot
	// Position is at or past the commit of every transaction the snapshot
	// sees; the chunk is merged once the stream has passed it.
	Position change.LSN
	Bytes    int64
	// Table is the table's shape in the snapshot: the columns Rows hold,
	// keyed like the table the read was asked for (nil: the one the chunk
	// was registered with).
	Table *change.Table
	// Sum, when set, stands for the rows, which were not sent: the count
	// and checksum the source computed over the chunk's range
	// (RangeSummer).
	Sum *RangeSum
}

// RangeSummer is a source that can count and checksum a key range itself,
// for verify: the rows stay on the server. A destination that computes the
// same kind of sum (sink.RangeSummer) compares with it.
type RangeSummer interface {
	// SumKind names the checksum.
	SumKind() string
	// SumRange sums up to Limit rows with key in (After, Upto] in one
	// snapshot, as ReadChunk would read them: the Chunk has no Rows but
	// a Sum. Filter and Columns must be unset.
	SumRange(ctx context.Context, t *change.Table, opt ReadOptions) (Chunk, error)
}

// RangeSum is a key range's row count and checksum.
type RangeSum struct {
	Rows int
	Sum  string
	// Last is the key of the range's last row when the range was cut at
	// Limit rows (nil: it reaches Upto).
	Last change.Key
}

// ReadOptions bound a chunk read.
type ReadOptions struct {
	After change.Key // exclusive lower bound; nil for the first chunk
	Upto  change.Key // inclusive upper bound; nil for none
	Limit int        // 0 for no limit
	// Filter is the condition the rows must match (nil for none), rendered
	// by the source: its literals are bound, never written into the query.
	Filter *rowfilter.Filter
	// Columns names the non-key columns to read (nil: all). The others
	// come back Unchanged, so that writing the row keeps them.
	Columns []string
	// Binary asks for the non-key values in the source's binary form
	// (change.Value.Binary), for a destination that takes them
	// (sink.BinaryChunks). A source may read text anyway: only a
	// PostgreSQL source reads binary, and only all columns of a table
	// pgbinary.TableOK accepts, without Columns.
	Binary bool
}

// TableSize is what the source says of a table before a backfill reads it.
type TableSize struct {
	// Rows is the row count: exact when Exact, else the server's estimate
	// from its statistics; -1 when unknown (a large table never analyzed).
	Rows  int64
	Exact bool
	// Bytes is the table's size on disk without indexes.
	Bytes int64
}

// Attribute is one column of a source table as the catalog holds it now,
// dropped columns included: what schema changes are judged by (see
// docs/schema-changes.md).
type Attribute struct {
	// Column is the column's description; Num is its number, which a
	// rename keeps and no later column reuses.
	change.Column
	Dropped   bool
	Generated bool
	// Missing is the value the rows older than the column hold: the
	// constant default it was added with, which the source gives those
	// rows without writing them, so without any change in the log. nil
	// when it has none.
	Missing *change.Value
	// HasDefault: the column has a default (or a generation expression).
	HasDefault bool
}

// LogState is what the source retains of its log for a stream.
type LogState struct {
	// Name is what retains it, as a person reads it in messages
	// ("replication slot tidemark_shop", "the binlog").
	Name string
	// Reset says what `tidemark stream reset` does to it once lost ("re-
	// creates the slot").
	Reset string
	// Exists: the retention (PostgreSQL: the replication slot) exists.
	Exists bool
	// Confirmed is the position the source last heard the destination
	// committed.
	Confirmed change.LSN
	// RetainedBytes is the log the source keeps for the stream.
	RetainedBytes int64
	// Invalidated: the source dropped log the stream had not read.
	Invalidated       bool
	InvalidatedReason string
}

// ReadTimeouts bound every transaction tidemark opens on the source.
type ReadTimeouts struct {
	// Statement cancels one statement that runs longer.
	Statement time.Duration
	// Lock gives up waiting for a lock after this long: a read queued
	// behind a schema change's lock does not hold up every query that
	// comes after it.
	Lock time.Duration
	// IdleInTransaction ends the session of a transaction left idle this
	// long, so that a stalled tidemark cannot keep a snapshot open on the
	// source.
	IdleInTransaction time.Duration
}

// DefaultReadTimeouts are the timeouts of a source whose configuration
// names none (docs/config.md).
var DefaultReadTimeouts = ReadTimeouts{Statement: 5 * time.Minute, Lock: 10 * time.Second, IdleInTransaction: time.Minute}

// OrDefault fills the unset timeouts with the defaults.
func (t ReadTimeouts) OrDefault() ReadTimeouts {
	if t.Statement <= 0 {
		t.Statement = DefaultReadTimeouts.Statement
	}
	if t.Lock <= 0 {
		t.Lock = DefaultReadTimeouts.Lock
	}
	if t.IdleInTransaction <= 0 {
		t.IdleInTransaction = DefaultReadTimeouts.IdleInTransaction
	}
	return t
}
