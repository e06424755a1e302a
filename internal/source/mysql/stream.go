package mysql

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/tidemark/tidemark/internal/change"
)

// TableLookup returns the described table for a source table, or nil when
// the table is not streamed.
type TableLookup func(change.TableID) *change.Table

// Commit is where a delivered transaction ended in the binlog, with its
// GTID: MariaDB's domain-server-sequence ("0-1-42"), or MySQL's
// source_uuid:transaction_id ("3e11fa47-…:23"); empty when the server
// writes none.
type Commit struct {
	Position change.LSN
	File     string
	GTID     string
}

// defaultHeartbeat is how often an idle server sends a heartbeat when
// Config.Heartbeat is 0.
const defaultHeartbeat = 5 * time.Second

// Stream reads the binlog from start (a transaction boundary: a chunk's
// snapshot position or a delivered transaction's CommitLSN; 0 for the
// server's current position) and sends to out, in commit order, every
// transaction that changed a streamed table as a change.Txn whose CommitLSN
// and EndLSN are the position just after its commit event (XID, or COMMIT
// for a non-transactional engine), and progress (every transaction ending
// at or below Progress was delivered) on heartbeats and, at most once a
// second, after transactions that changed nothing streamed. Values go
// through the same codec as ReadChunk's. Each event carries the GTID state
// after it as its resume token (see StreamFrom).
//
// It connects as a replica with Config.ServerID and returns when ctx ends
// (with ctx's error) or the connection fails; it does not reconnect by
// itself (go-mysql's reconnect resumes mid-transaction, after the table
// maps it needs), so the caller restarts it from the last position it
// committed. Stream never closes out. LastCommit tells the GTID of the
// last transaction sent.
func (s *Source) Stream(ctx context.Context, start change.LSN, lookup TableLookup, out chan<- change.Event) error {
	return s.StreamFrom(ctx, Resume{Position: start}, lookup, out)
}

// Resume is where a stream resumes: a position and the GTID state
// committed with it (the destination checkpoint's resume token; empty when
// it has none).
type Resume struct {
	Position change.LSN
	GTIDs    string
}

// StreamFrom is Stream from a checkpoint: with a GTID state and a server
// that writes GTIDs it asks the server for the transactions after that
// state (so a replica promoted in a failover, whose binlog is numbered
// otherwise, continues it), else for the binlog from the position. Its
// positions are in the epoch PlanResume chose.
func (s *Source) StreamFrom(ctx context.Context, from Resume, lookup TableLookup, out chan<- change.Event) error {
	if s.cfg.ServerID == 0 {
		return errors.New("stream: the source needs a server id of its own (unique among the server's replicas)")
	}
	info, err := s.binlogInfo(ctx)
	if err != nil {
		return err
	}
	plan, err := s.PlanResume(ctx, from)
	if err != nil {
		return err
	}
	start := from.Position
	if start == 0 {
		start = info.current
	}
	if uint32(start) < 4 {
		start = start&^0xFFFFFFFF | 4 // a binlog file's first event is at 4
	}
	syncer := replication.NewBinlogSyncer(s.syncerConfig(info.flavor))
	defer syncer.Close()
	s.readers.Add(1)
	defer s.readers.Add(-1)
	r := &binlogReader{last: start, epoch: plan.epoch, state: plan.state, src: s, lookup: lookup, out: out, readers: map[change.TableID]*eventTable{}}
	at := FormatPosition(info.base, start)
	var streamer *replication.BinlogStreamer
	if plan.byGTID {
		at = "GTID " + plan.state.String()
		set, err := plan.state.syncSet()
		if err != nil {
			return fmt.Errorf("start reading the binlog after %s: %w", at, err)
		}
		streamer, err = syncer.StartSyncGTID(set)
		if err != nil {
			return classifyStream(fmt.Errorf("start: %w", err), at)
		}
	} else {
		if r.state == nil {
			if r.state, err = s.gtidStateAt(ctx, info, start); err != nil {
				return err
			}
		}
		r.file = FileName(info.base, start)
		streamer, err = syncer.StartSync(gomysql.Position{Name: r.file, Pos: uint32(start)})
		if err != nil {
			return fmt.Errorf("start reading the binlog at %s: %w", at, err)
		}
	}
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.file != "" {
				at = FormatPosition(info.base, r.last)
			}
			return classifyStream(err, at)
		}
		if err := r.handle(ctx, ev); err != nil {
			return err
		}
		if ev.Header.LogPos > 0 && r.file != "" {
			if pos, err := Position(r.file, ev.Header.LogPos); err == nil {
				s.readTo.Store(uint64(pos))
			}
		}
	}
}

// LastCommit is where the last transaction Stream sent ended, and its GTID.
func (s *Source) LastCommit() Commit {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.lastCommit
}

func (s *Source) syncerConfig(flavor string) replication.BinlogSyncerConfig {
	host, port, _ := net.SplitHostPort(s.dsn.Host)
	p, _ := strconv.ParseUint(port, 10, 16)
	hb := cmp.Or(s.cfg.Heartbeat, defaultHeartbeat)
	return replication.BinlogSyncerConfig{
		ServerID: s.cfg.ServerID, Flavor: flavor,
		Host: host, Port: uint16(p), User: s.dsn.User, Password: s.dsn.Password,
		Charset:                 "utf8mb4",
		TimestampStringLocation: time.UTC,
		HeartbeatPeriod:         hb,
		ReadTimeout:             3 * hb,
		DisableRetrySync:        true,
		Logger:                  s.log(),
	}
}

type binlogInfo struct {
	flavor  string     // gomysql.MariaDBFlavor or MySQLFlavor
	base    string     // binlog base name, "mysql-bin"
	current change.LSN // the server's current binlog position
	// executed is MySQL's gtid_executed at current, read with it ("" when
	// the server writes no GTIDs, and on MariaDB).
	executed string
}

func (s *Source) binlogInfo(ctx context.Context) (binlogInfo, error) {
	var info binlogInfo
	err := s.with(ctx, func(c *client.Conn) error {
		var err error
		if info.flavor, info.base, err = flavorAndBase(c); err != nil {
			return err
		}
		file, pos, executed, err := binlogStatus(c)
		if err != nil {
			return err
		}
		if info.flavor == gomysql.MySQLFlavor {
			info.executed = executed
		}
		info.current, err = Position(file, pos)
		return err
	})
	if err != nil {
		return binlogInfo{}, fmt.Errorf("read the binlog's name and position: %w", err)
	}
	return info, nil
}

// PinStart reads the binlog's end for a stream that starts there later:
// its GTID state there is remembered (MySQL has no function that finds it
// for a position behind the end).
func (s *Source) PinStart(ctx context.Context) (change.LSN, error) {
	info, err := s.binlogInfo(ctx)
	if err != nil {
		return 0, err
	}
	s.pinMu.Lock()
	s.pinned = info
	s.pinMu.Unlock()
	return info.current, nil
}

// CurrentPosition is the end of the server's binlog.
func (s *Source) CurrentPosition(ctx context.Context) (change.LSN, error) {
	info, err := s.binlogInfo(ctx)
	return info.current, err
}

// masterStatus reads the binlog's current file and offset.
func masterStatus(c *client.Conn) (string, uint32, error) {
	file, pos, _, err := binlogStatus(c)
	return file, pos, err
}

// binlogStatus reads the binlog's current file and offset, and on MySQL
// the GTIDs executed up to it (SHOW BINARY LOG STATUS on MySQL 8.2 and
// later, SHOW MASTER STATUS elsewhere).
func binlogStatus(c *client.Conn) (file string, pos uint32, executed string, err error) {
	r, err := query(c, "SHOW MASTER STATUS")
	if err != nil {
		if r, err = query(c, "SHOW BINARY LOG STATUS"); err != nil {
			return "", 0, "", err
		}
	}
	if r.RowNumber() == 0 {
		return "", 0, "", errors.New("the binary log is off: set log_bin (see tidemark doctor)")
	}
	p, _ := r.GetUint(0, 1)
	if len(r.Fields) > 4 { // Executed_Gtid_Set, MySQL only
		executed = getString(r, 0, 4)
	}
	return getString(r, 0, 0), uint32(p), executed, nil
}

// binlogReader groups row events into transactions.
type binlogReader struct {
	src     *Source
	lookup  TableLookup
	out     chan<- change.Event
	file    string
	gtid    string
	epoch   uint8       // of every position sent
	state   *gtidState  // the GTID state after the last transaction; nil when unknown
	txn     *change.Txn // nil between transactions
	last    change.LSN  // the end of the last transaction handled
	lastAt  time.Time   // when progress was last sent
	readers map[change.TableID]*eventTable
}

func (r *binlogReader) handle(ctx context.Context, ev *replication.BinlogEvent) error {
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		r.file = string(e.NextLogName)
	case *replication.MariadbGTIDEvent:
		r.gtid = mariadbGTID(ev, e)
		r.txn = &change.Txn{}
	case *replication.GTIDEvent:
		r.gtid = ""
		if u, err := uuid.FromBytes(e.SID); err == nil && e.GNO > 0 { // not an anonymous transaction
			r.gtid = u.String() + ":" + strconv.FormatInt(e.GNO, 10)
		}
		r.txn = &change.Txn{}
	case *replication.QueryEvent:
		switch strings.ToUpper(strings.TrimSpace(string(e.Query))) {
		case "BEGIN":
			if r.txn == nil {
				r.txn = &change.Txn{}
			}
		default: // COMMIT of a non-transactional engine, or a DDL
			r.schemaChange(e)
			return r.commit(ctx, ev.Header, 0)
		}
	case *replication.XIDEvent:
		return r.commit(ctx, ev.Header, e.XID)
	case *replication.RowsEvent:
		return r.rows(ctx, ev.Header, e)
	case *replication.GenericEvent:
		if ev.Header.EventType == replication.HEARTBEAT_EVENT && r.txn == nil && ev.Header.LogPos > 0 {
			return r.progress(ctx, ev.Header.LogPos, true)
		}
	}
	return nil
}

// mariadbGTID reads a MariaDB GTID event's GTID from the event's bytes:
// in a dump by GTID, go-mysql keeps a pointer to the first decoded GTID of
// each domain and server and moves it forward, in its own goroutine, as
// later events arrive, so the decoded field may already hold a later
// transaction's.
func mariadbGTID(ev *replication.BinlogEvent, e *replication.MariadbGTIDEvent) string {
	body := ev.RawData
	if len(body) < replication.EventHeaderSize+12 {
		return e.GTID.String() // an event made without its bytes
	}
	body = body[replication.EventHeaderSize:]
	seq, domain := binary.LittleEndian.Uint64(body), binary.LittleEndian.Uint32(body[8:])
	return fmt.Sprintf("%d-%d-%d", domain, ev.Header.ServerID, seq)
}

func (r *binlogReader) commit(ctx context.Context, h *replication.EventHeader, xid uint64) error {
	txn := r.txn
	r.txn = nil
	pos, err := r.position(h.LogPos)
	if err != nil {
		return err
	}
	r.last = pos
	if r.state != nil {
		if err := r.state.add(r.gtid); err != nil {
			return fmt.Errorf("the binlog at %s: %w", FormatPosition("", pos), err)
		}
	}
	if txn == nil || len(txn.Changes) == 0 {
		return r.progress(ctx, h.LogPos, false)
	}
	txn.Xid, txn.CommitLSN, txn.EndLSN = uint32(xid), pos, pos
	txn.CommitTime = time.Unix(int64(h.Timestamp), 0).UTC()
	select {
	case r.out <- change.Event{Txn: txn, Resume: r.state.String()}:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.src.commitMu.Lock()
	r.src.lastCommit = Commit{Position: pos, File: r.file, GTID: r.gtid}
	r.src.commitMu.Unlock()
	r.lastAt = time.Now()
	return nil
}

// progress reports the position after the last transaction handled:
// always on a heartbeat, else at most once a second.
func (r *binlogReader) progress(ctx context.Context, logPos uint32, heartbeat bool) error {
	if !heartbeat && time.Since(r.lastAt) < time.Second || r.file == "" {
		return nil // r.file: a stream resumed by GTID learns its file first
	}
	pos, err := r.position(logPos)
	if err != nil {
		return err
	}
	r.last, r.lastAt = pos, time.Now()
	select {
	case r.out <- change.Event{Progress: pos, Resume: r.state.String()}:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// position is the LSN of an offset in the file being read.
func (r *binlogReader) position(logPos uint32) (change.LSN, error) {
	pos, err := Position(r.file, logPos)
	return inEpoch(pos, r.epoch), err
}

// OldestPosition is the start of the oldest binlog file the server still
// has: a stream whose position is older cannot resume (ErrPositionPurged).
func (s *Source) OldestPosition(ctx context.Context) (change.LSN, error) {
	var oldest change.LSN
	err := s.with(ctx, func(c *client.Conn) error {
		r, err := query(c, "SHOW BINARY LOGS")
		if err != nil {
			return err
		}
		if r.RowNumber() == 0 {
			return errors.New("the server lists no binlog files: is log_bin on?")
		}
		oldest, err = Position(getString(r, 0, 0), 4)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read the oldest binlog file: %w", err)
	}
	return oldest, nil
}
