package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/tidemark/tidemark/internal/change"
)

// TableLookup returns the described table for a source table, or nil when
// the table is not streamed.
type TableLookup func(change.TableID) *change.Table

// Stream replicates from start and sends transactions, in commit order, and
// progress to out. It returns when ctx ends (with ctx's error) or the
// connection fails; errors that need a person are PermanentError. Stream
// never closes out.
func (s *Source) Stream(ctx context.Context, start change.LSN, lookup TableLookup, out chan<- change.Event) error {
	conn, err := s.replicationConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	err = pglogrepl.StartReplication(ctx, conn, s.cfg.Slot, pglogrepl.LSN(start), pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + escapeLiteral(s.cfg.Publication) + "'"},
	})
	if err != nil {
		return classify(fmt.Errorf("start replication at %s: %w", start, err))
	}
	s.log.Info("replication started", "slot", s.cfg.Slot, "lsn", start)
	r := &receiver{src: s, conn: conn, lookup: lookup, out: out, relations: map[uint32]*relation{}}
	return r.run(ctx)
}

type relation struct {
	table *change.Table
	// cols maps the relation message's column positions to table columns.
	cols []int
}

type receiver struct {
	src        *Source
	conn       *pgconn.PgConn
	lookup     TableLookup
	out        chan<- change.Event
	relations  map[uint32]*relation
	txn        *change.Txn
	position   change.LSN // all transactions ending at or below it were sent
	reported   change.LSN
	nextStatus time.Time
	lastProbe  time.Time
}

func (r *receiver) run(ctx context.Context) error {
	for {
		if err := r.maybeSendStatus(ctx); err != nil {
			return err
		}
		deadline := r.nextStatus
		if r.probing() {
			deadline = r.lastProbe.Add(r.src.cfg.ProbeInterval)
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := r.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			return classify(fmt.Errorf("receive replication message: %w", err))
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := r.handleCopyData(ctx, msg.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return classify(fmt.Errorf("replication: %w", pgconn.ErrorResponseToPgError(msg)))
		}
	}
}

func (r *receiver) probing() bool {
	return change.LSN(r.src.want.Load()) > r.position
}

// maybeSendStatus reports the confirmed position on schedule, and asks for
// a reply (which carries the stream's position) while a chunk waits for it.
func (r *receiver) maybeSendStatus(ctx context.Context) error {
	now := time.Now()
	probe := r.probing() && now.Sub(r.lastProbe) >= r.src.cfg.ProbeInterval
	if now.Before(r.nextStatus) && !probe {
		return nil
	}
	if probe {
		r.lastProbe = now
	}
	return r.sendStatus(ctx, probe)
}

func (r *receiver) sendStatus(ctx context.Context, reply bool) error {
	pos := pglogrepl.LSN(r.src.confirmed.Load())
	err := pglogrepl.SendStandbyStatusUpdate(ctx, r.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos, ReplyRequested: reply,
	})
	if err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	r.nextStatus = time.Now().Add(r.src.cfg.StatusInterval)
	return nil
}

func (r *receiver) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		if err := r.progress(ctx, change.LSN(ka.ServerWALEnd)); err != nil {
			return err
		}
		if ka.ReplyRequested {
			return r.sendStatus(ctx, false)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		return r.handleMessage(ctx, xld.WALData)
	}
	return nil
}

// progress reports that the server has sent everything before lsn. Inside a
// transaction it waits for the commit.
func (r *receiver) progress(ctx context.Context, lsn change.LSN) error {
	if r.txn != nil || lsn <= r.position {
		return nil
	}
	r.position = lsn
	return r.send(ctx, change.Event{Progress: lsn})
}

// send hands an event on. While the consumer is blocked (the destination
// is down, say) it keeps the connection alive with status updates, so the
// server does not drop it for silence.
func (r *receiver) send(ctx context.Context, ev change.Event) error {
	for {
		wait := time.Until(r.nextStatus)
		if wait <= 0 {
			if err := r.sendStatus(ctx, false); err != nil {
				return err
			}
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case r.out <- ev:
			timer.Stop()
			return nil
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

func (r *receiver) handleMessage(ctx context.Context, wal []byte) error {
	msg, err := pglogrepl.Parse(wal)
	if err != nil {
		return fmt.Errorf("parse pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		r.relations[m.RelationID] = r.relationFor(m)
	case *pglogrepl.BeginMessage:
		r.txn = &change.Txn{Xid: m.Xid, CommitLSN: change.LSN(m.FinalLSN), CommitTime: m.CommitTime}
	case *pglogrepl.CommitMessage:
		if r.txn == nil {
			return fmt.Errorf("commit at %s without begin", m.CommitLSN)
		}
		txn := r.txn
		txn.EndLSN = change.LSN(m.TransactionEndLSN)
		r.txn = nil
		if err := r.send(ctx, change.Event{Txn: txn}); err != nil {
			return err
		}
		if txn.EndLSN > r.position {
			r.position = txn.EndLSN
		}
	case *pglogrepl.InsertMessage:
		return r.addRowChange(change.Insert, m.RelationID, nil, m.Tuple, len(wal))
	case *pglogrepl.UpdateMessage:
		return r.addRowChange(change.Update, m.RelationID, m.OldTuple, m.NewTuple, len(wal))
	case *pglogrepl.DeleteMessage:
		return r.addRowChange(change.Delete, m.RelationID, m.OldTuple, nil, len(wal))
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if rel := r.relations[id]; rel != nil && rel.table != nil && r.txn != nil {
				r.txn.Changes = append(r.txn.Changes, change.Change{Kind: change.Truncate, Table: rel.table, Bytes: len(wal)})
			}
		}
	}
	return nil
}

// relationFor maps a relation message onto the described table. A column
// set that no longer matches the description is a schema change: the table
// is rebuilt from the message, keeping the key by column name.
func (r *receiver) relationFor(m *pglogrepl.RelationMessage) *relation {
	id := change.TableID{Schema: m.Namespace, Name: m.RelationName}
	described := r.lookup(id)
	if described == nil {
		return &relation{}
	}
	rel := &relation{table: described, cols: make([]int, len(m.Columns))}
	same := len(m.Columns) == len(described.Columns)
	for i, c := range m.Columns {
		rel.cols[i] = described.ColumnIndex(c.Name)
		if rel.cols[i] != i {
			same = false
		}
	}
	if same {
		return rel
	}
	t := &change.Table{ID: id}
	for i, c := range m.Columns {
		col := change.Column{Name: c.Name, Type: "text", TypeOID: c.DataType, BaseOID: c.DataType}
		if j := described.ColumnIndex(c.Name); j >= 0 {
			col = described.Columns[j]
		}
		t.Columns = append(t.Columns, col)
		rel.cols[i] = i
	}
	for _, k := range described.KeyColumns() {
		if j := t.ColumnIndex(k.Name); j >= 0 {
			t.Key = append(t.Key, j)
		}
	}
	r.src.log.Warn("source table changed shape; streaming with the new columns", "object", id.String())
	rel.table = t
	return rel
}

func (r *receiver) addRowChange(kind change.Kind, relID uint32, oldTuple, newTuple *pglogrepl.TupleData, size int) error {
	rel, ok := r.relations[relID]
	if !ok {
		return fmt.Errorf("row change for unknown relation %d", relID)
	}
	if rel.table == nil || r.txn == nil {
		return nil
	}
	t := rel.table
	c := change.Change{Kind: kind, Table: t, Bytes: size}
	if newTuple != nil {
		c.Row = rel.row(newTuple)
	}
	if oldTuple != nil {
		old := rel.row(oldTuple)
		if c.Row != nil {
			fillFromOld(c.Row, old)
		}
		c.OldKey = t.RowKey(old)
		if kind == change.Update && c.Row != nil && c.OldKey.Encode() == t.RowKey(c.Row).Encode() {
			c.OldKey = nil
		}
	}
	if kind == change.Delete && c.OldKey == nil {
		return fmt.Errorf("delete on %s carries no key: set REPLICA IDENTITY on the table", t.ID)
	}
	r.txn.Changes = append(r.txn.Changes, c)
	return nil
}

func (rel *relation) row(td *pglogrepl.TupleData) change.Row {
	row := make(change.Row, len(rel.table.Columns))
	for i := range row {
		row[i] = change.Null
	}
	for i, col := range td.Columns {
		if i >= len(rel.cols) || rel.cols[i] < 0 {
			continue
		}
		var v change.Value
		switch col.DataType {
		case pglogrepl.TupleDataTypeNull:
			v = change.Null
		case pglogrepl.TupleDataTypeToast:
			v = change.Value{Unchanged: true}
		default:
			v = change.Text(string(col.Data))
		}
		row[rel.cols[i]] = v
	}
	return row
}

func escapeLiteral(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// fillFromOld replaces the unchanged-TOAST markers of an update's new row
// with the old tuple's values where the old tuple carries one: the marker
// means the update did not touch the value, so it equals the old one.
// pgoutput sends a value in the old tuple for every column under REPLICA
// IDENTITY FULL, and for the key columns when the replica identity holds an
// out-of-line value, even one the update left alone; the new row then has
// the marker in the key. Without the value a sink could neither find the row
// by its key nor insert it, and the merge would file it under a wrong key.
func fillFromOld(row, old change.Row) {
	for i, v := range row {
		if v.Unchanged && !old[i].Null && !old[i].Unchanged {
			row[i] = old[i]
		}
	}
}
