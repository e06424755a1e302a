package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
)

// TableLookup returns the described table for a source table.
type TableLookup = source.TableLookup

// Stream replicates from start and sends transactions, in commit order, and
// progress to out. It returns when ctx ends (with ctx's error) or the
// connection fails; errors that need a person are PermanentError. Stream
// never closes out.
func (s *Source) Stream(ctx context.Context, start change.LSN, lookup TableLookup, out chan<- change.Event) error {
	if s.cfg.TakeOver {
		if err := s.takeOverSlot(ctx); err != nil {
			return err
		}
	}
	conn, err := s.replicationConn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = pglogrepl.StartReplication(ctx, conn, s.cfg.Slot, pglogrepl.LSN(start), pglogrepl.StartReplicationOptions{
		// pgoutput reads publication_names as a list of SQL identifiers: an
		// unquoted name would be folded to lower case and split at commas.
		PluginArgs: []string{"proto_version '1'", "publication_names '" + escapeLiteral(quoteIdent(s.cfg.Publication)) + "'"},
	})
	if err != nil {
		return classify(fmt.Errorf("start replication at %s: %w", start, err))
	}
	s.log.Info("replication started", logkey.Slot(s.cfg.Slot), "lsn", start)
	r := &receiver{src: s, conn: conn, lookup: lookup, out: out, relations: map[uint32]*relation{}, types: map[typeKey]typeInfo{}}
	return r.run(ctx)
}

type relation struct {
	table *change.Table
	// cols maps the relation message's column positions to table columns.
	cols []int
	// m is the relation message the table was resolved from.
	m *pglogrepl.RelationMessage
}

type receiver struct {
	src        *Source
	conn       *pgconn.PgConn
	lookup     TableLookup
	out        chan<- change.Event
	relations  map[uint32]*relation
	types      map[typeKey]typeInfo // type names resolveRelation looked up
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
		rel, err := r.relationFor(ctx, m)
		if err != nil {
			return err
		}
		r.relations[m.RelationID] = rel
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
		return r.addRowChange(ctx, change.Insert, m.RelationID, nil, m.Tuple, len(wal))
	case *pglogrepl.UpdateMessage:
		return r.addRowChange(ctx, change.Update, m.RelationID, m.OldTuple, m.NewTuple, len(wal))
	case *pglogrepl.DeleteMessage:
		return r.addRowChange(ctx, change.Delete, m.RelationID, m.OldTuple, nil, len(wal))
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			rel, err := r.relation(ctx, id)
			if err != nil {
				return err
			}
			if rel != nil && rel.table != nil && r.txn != nil {
				r.txn.Changes = append(r.txn.Changes, change.Change{Kind: change.Truncate, Table: rel.table, Bytes: len(wal)})
			}
		}
	}
	return nil
}

// relationFor maps a relation message onto the streamed table. A message
// whose columns differ from the last one of the relation is resolved
// against the catalog (resolveRelation): the table it gives numbers its
// columns by attnum, so the stream can tell a renamed column from a dropped
// and an added one, and change the destination to match (see
// docs/schema-changes.md). The same message again gives the same table.
func (r *receiver) relationFor(ctx context.Context, m *pglogrepl.RelationMessage) (*relation, error) {
	id := change.TableID{Schema: m.Namespace, Name: m.RelationName}
	prev := r.lookup(id)
	if prev == nil {
		return &relation{m: m}, nil
	}
	if old := r.relations[m.RelationID]; old != nil && old.table != nil && old.table.ID == id && sameColumns(old.m.Columns, m.Columns) {
		return old, nil
	}
	t, err := r.src.resolveRelation(ctx, prev, m, r.types)
	if err != nil {
		return nil, err
	}
	if change.SameShape(t, prev) {
		t = prev
	}
	rel := &relation{table: t, cols: make([]int, len(m.Columns)), m: m}
	for i := range rel.cols {
		rel.cols[i] = i
	}
	return rel, nil
}

// sameColumns compares the columns of two relation messages.
func sameColumns(a, b []*pglogrepl.RelationMessageColumn) bool {
	if len(a) != len(b) {
		return false
	}
	for i, c := range a {
		if c.Name != b[i].Name || c.DataType != b[i].DataType || c.TypeModifier != b[i].TypeModifier {
			return false
		}
	}
	return true
}

// relation is the relation of a change. One whose table was not streamed
// when its relation message came is looked up again: a table the stream
// started streaming since (found while running, or renamed) gets no new
// relation message, as it already is in the publication.
func (r *receiver) relation(ctx context.Context, relID uint32) (*relation, error) {
	rel := r.relations[relID]
	if rel == nil || rel.table != nil || rel.m == nil {
		return rel, nil
	}
	if r.lookup(change.TableID{Schema: rel.m.Namespace, Name: rel.m.RelationName}) == nil {
		return rel, nil
	}
	rel, err := r.relationFor(ctx, rel.m)
	if err != nil {
		return nil, err
	}
	r.relations[relID] = rel
	return rel, nil
}

func (r *receiver) addRowChange(ctx context.Context, kind change.Kind, relID uint32, oldTuple, newTuple *pglogrepl.TupleData, size int) error {
	rel, err := r.relation(ctx, relID)
	if err != nil {
		return err
	}
	if rel == nil {
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
