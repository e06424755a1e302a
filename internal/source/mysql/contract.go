package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source"
)

// streamSource is a MySQL or MariaDB source as a stream uses it: the
// contract of internal/source over Source.
//
// The binlog carries every table, so there is nothing to capture and no
// slot to keep: the server retains binlog files by age and size
// (binlog_expire_logs_seconds), and LogState reports a stream whose
// position was purged as invalidated.
type streamSource struct {
	src       *Source
	confirmed atomic.Uint64
	// from is where the running Stream started reading: a stream reset
	// starts at the binlog's end, past a purged position it confirmed
	// before.
	from atomic.Uint64
	// resume is the checkpoint ResumeFrom was told: its GTID state is
	// where Stream from its position resumes.
	resume atomic.Pointer[Resume]
	// start is where a stream starting over reads from: the binlog's end
	// when EnsureLog ran, before the stream reported itself running, so
	// a change made once it runs is never before it.
	start atomic.Uint64
}

var _ source.Source = (*streamSource)(nil)

func (s *streamSource) Close() { s.src.Close() }

func (s *streamSource) Tables(ctx context.Context) ([]change.TableID, error) {
	return s.src.ListTables(ctx)
}

func (s *streamSource) Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error) {
	return s.src.Describe(ctx, id, keyCols)
}

// Attributes are the table's columns now, numbered as the stream numbers
// them (colnums.go): MySQL's ordinal positions move when a column is added
// in the middle or dropped. A number given before whose column is gone is
// Dropped. A column whose older rows got a value without a row change in
// the binlog (a DEFAULT, or NOT NULL's implicit one) has HasDefault: the
// applier backfills the table again when it is added.
func (s *streamSource) Attributes(ctx context.Context, id change.TableID) (map[int16]source.Attribute, error) {
	var (
		t        *change.Table
		defaults map[string]bool
	)
	err := s.src.with(ctx, func(c *client.Conn) (err error) {
		if t, err = describeColumns(c, id); err != nil {
			return err
		}
		defaults, err = columnsWithDefaults(c, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := s.src.nums.attributes(t)
	for n, a := range out {
		if !a.Dropped && defaults[a.Name] {
			a.HasDefault = true
			out[n] = a
		}
	}
	return out, nil
}

// PrepareCapture, Captures and AddCapture: the binlog carries every
// table's changes.
func (s *streamSource) PrepareCapture(context.Context, []change.TableID) error { return nil }
func (s *streamSource) Captures(context.Context, change.TableID) (bool, error) { return true, nil }
func (s *streamSource) AddCapture(context.Context, change.TableID) error       { return nil }

// EnsureLog has no log to create (the server keeps the binlog for every
// reader), but a stream starting over (ResumeFrom was told position 0)
// pins its start there: the binlog's end now, not when Stream gets to
// read it.
func (s *streamSource) EnsureLog(ctx context.Context) (bool, error) {
	if r := s.resume.Load(); r != nil && r.Position != 0 {
		return false, nil
	}
	end, err := s.src.PinStart(ctx)
	if err != nil {
		return false, err
	}
	s.start.Store(uint64(end))
	return false, nil
}

// DropLog: there is nothing to drop.
func (s *streamSource) DropLog(context.Context) error { return nil }

// LogState reports the binlog the server keeps from the position the
// destination confirmed, and whether that position was purged.
func (s *streamSource) LogState(ctx context.Context) (source.LogState, error) {
	state := source.LogState{Name: "the binlog", Reset: "starts again from the binlog's current position", Exists: true, Confirmed: change.LSN(s.confirmed.Load())}
	var logs []binaryLog
	err := s.src.with(ctx, func(c *client.Conn) (err error) {
		logs, err = binaryLogs(c)
		return err
	})
	if err != nil {
		return state, fmt.Errorf("list the binlog files: %w", err)
	}
	if len(logs) == 0 {
		return state, &source.PermanentError{Err: errors.New("the server keeps no binlog files"),
			Hint: "turn the binary log on (log_bin, binlog_format=ROW), restart the server, then run `tidemark doctor`"}
	}
	from := max(state.Confirmed, change.LSN(s.from.Load()))
	if from == 0 {
		return state, nil
	}
	if epochOf(from) != s.src.Epoch() {
		// A position of an older numbering: the stream resumes by GTID,
		// which the server may no longer have.
		return s.gtidLogState(ctx, state)
	}
	from = binlogPos(from)
	if first := logs[0].pos; from>>32 < first>>32 {
		state.Invalidated = true
		state.InvalidatedReason = fmt.Sprintf("binlog file %06d, where the stream was, was purged; the oldest the server keeps is %s", from>>32, logs[0].name)
		return state, nil
	}
	for _, l := range logs {
		switch {
		case l.pos>>32 == from>>32:
			state.RetainedBytes += max(l.size-int64(uint32(from)), 0)
		case l.pos>>32 > from>>32:
			state.RetainedBytes += l.size
		}
	}
	return state, nil
}

// gtidLogState judges the binlog by the checkpoint's GTID state.
func (s *streamSource) gtidLogState(ctx context.Context, state source.LogState) (source.LogState, error) {
	r := s.resume.Load()
	if r == nil || r.GTIDs == "" {
		return state, nil
	}
	why, err := s.src.gtidPurged(ctx, r.GTIDs)
	if err != nil {
		return state, fmt.Errorf("compare the stream's GTID state with the server's binlog: %w", err)
	}
	state.Invalidated, state.InvalidatedReason = why != "", why
	return state, nil
}

// ResumeFrom is told the destination's checkpoint before LogState and
// Stream: its GTID state (the token) is where Stream from its position
// resumes, and it decides the epoch of every position from now on.
func (s *streamSource) ResumeFrom(ctx context.Context, pos change.LSN, token string) error {
	r := Resume{Position: pos, GTIDs: token}
	if _, err := s.src.PlanResume(ctx, r); err != nil {
		return err
	}
	s.resume.Store(&r)
	return nil
}

// formatResume writes a checkpoint's resume token (the GTID state) for a
// person.
func formatResume(token string) string { return "GTID " + token }

// binaryLog is one binlog file the server keeps, its first position and
// its size.
type binaryLog struct {
	name string
	pos  change.LSN
	size int64
}

func binaryLogs(c *client.Conn) ([]binaryLog, error) {
	r, err := query(c, "SHOW BINARY LOGS")
	if err != nil {
		return nil, err
	}
	var out []binaryLog
	for i := range r.RowNumber() {
		name := getString(r, i, 0)
		pos, err := Position(name, 0)
		if err != nil {
			return nil, err
		}
		size, _ := r.GetInt(i, 1)
		out = append(out, binaryLog{name: name, pos: pos, size: size})
	}
	return out, nil
}

func (s *streamSource) Stream(ctx context.Context, start change.LSN, lookup source.TableLookup, out chan<- change.Event) error {
	from := Resume{Position: start}
	if r := s.resume.Load(); r != nil && r.Position == start {
		from.GTIDs = r.GTIDs
	}
	if start == 0 {
		// A stream starting over reads from the binlog's end when
		// EnsureLog ran, or else from its end now; it has no GTID state
		// to resume by.
		from.GTIDs = ""
		from.Position = change.LSN(s.start.Load())
		if from.Position == 0 {
			end, err := s.src.CurrentPosition(ctx)
			if err != nil {
				return err
			}
			from.Position = end
		}
		start = inEpoch(from.Position, s.src.Epoch())
	}
	s.from.Store(uint64(start))
	err := s.src.StreamFrom(ctx, from, TableLookup(lookup), out)
	if errors.Is(err, ErrPositionPurged) && from.GTIDs != "" {
		// The message names the reset already; the hint says when to wait.
		return &source.PermanentError{Err: err, Hint: "if this server is a replica promoted while behind the stream's GTID state, let it catch up and resume the stream; otherwise `tidemark stream reset` is the way back"}
	}
	return err
}

// Confirm records what the destination committed. A binlog reader has
// nothing to acknowledge: the server keeps files by age, not by readers.
// Position 0 is a stream starting over (a first start, or a reset after its
// position was purged): what was confirmed before no longer says where the
// stream needs the binlog from.
func (s *streamSource) Confirm(pos change.LSN) {
	if pos == 0 {
		s.confirmed.Store(0)
		return
	}
	for {
		cur := s.confirmed.Load()
		if uint64(pos) <= cur || s.confirmed.CompareAndSwap(cur, uint64(pos)) {
			return
		}
	}
}

// WantPosition needs no request: an idle server sends a heartbeat every
// Config.Heartbeat, and Stream reports progress on each.
func (s *streamSource) WantPosition(change.LSN) {}

func (s *streamSource) ReadChunk(ctx context.Context, t *change.Table, opt source.ReadOptions) (source.Chunk, error) {
	c, err := s.src.ReadChunk(ctx, t, ReadOptions{After: opt.After, Upto: opt.Upto, Limit: opt.Limit, Filter: opt.Filter, Columns: opt.Columns})
	if err != nil {
		return source.Chunk{}, err
	}
	pos := inEpoch(c.Position, s.src.Epoch())
	// The rows hold the columns of the table in the snapshot (t's, unless
	// it changed): the merge follows a newer shape, and translates the
	// rows and the changes of the chunk's window into the destination's
	// (docs/schema-changes.md, MySQL).
	return source.Chunk{Rows: c.Rows, Snapshot: binlogSnapshot{at: pos}, Position: pos, Bytes: c.Bytes, Table: c.Table}, nil
}

func (s *streamSource) CheckFilter(ctx context.Context, t *change.Table, filter *rowfilter.Filter) error {
	return s.src.CheckFilter(ctx, t, filter)
}

// ReadGenerated is never needed: a full row image carries every column,
// generated ones included.
func (s *streamSource) ReadGenerated(_ context.Context, _ *change.Table, cols []int, keys []change.Key, _ uint32) ([][]change.Value, bool, error) {
	return nil, false, errors.New("mysql rows carry their generated columns: nothing to read again")
}

// binlogSnapshot is a consistent snapshot's rule: it reflects exactly the
// transactions committed at or before its binlog position (see
// docs/backfill.md, MySQL). A transaction the stream applied before a
// chunk registered was in the binlog before the chunk's snapshot was taken,
// but not necessarily at or before its position: MariaDB sends a group
// commit's events to replicas before it takes LOCK_commit_ordered, commits
// them in InnoDB and moves binlog_snapshot_position past them. So its id
// tells nothing (VisibleXid answers true); the applier compares the commit
// positions it applied before registration with the snapshot's position
// instead (stream's applier.raced) and has such a chunk read again.
type binlogSnapshot struct{ at change.LSN }

func (b binlogSnapshot) VisibleXid(uint32) bool            { return true }
func (b binlogSnapshot) Widen(uint32) uint64               { return 0 }
func (b binlogSnapshot) Horizon() uint64                   { return 0 }
func (b binlogSnapshot) SeesCommit(commit change.LSN) bool { return commit <= b.at }

// formatPosition writes a position as the binlog file's number and the
// offset in it ("000003:1234"): the base name is the server's.
func formatPosition(pos change.LSN) string {
	return strings.TrimPrefix(FormatPosition("", pos), ".")
}

func (s *streamSource) EstimateTable(ctx context.Context, id change.TableID) (source.TableSize, error) {
	return estimateTable(ctx, s.src, id)
}

func (s *streamSource) InRange(ctx context.Context, t *change.Table, keys []change.Key, low, high change.Key) ([]bool, error) {
	return s.src.InRange(ctx, t, keys, low, high)
}

func estimateTable(ctx context.Context, src *Source, id change.TableID) (source.TableSize, error) {
	size, err := src.EstimateTable(ctx, id)
	if err != nil {
		return source.TableSize{}, err
	}
	return source.TableSize{Rows: size.Rows, Exact: size.Exact, Bytes: size.Bytes}, nil
}

// estimator sizes tables for `tidemark estimate` outside a running stream.
type estimator struct{ src *Source }

func (e estimator) EstimateTable(ctx context.Context, id change.TableID) (source.TableSize, error) {
	return estimateTable(ctx, e.src, id)
}

func (e estimator) Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error) {
	return e.src.Describe(ctx, id, keyCols)
}

func (e estimator) Close(context.Context) error { return e.src.Close() }
