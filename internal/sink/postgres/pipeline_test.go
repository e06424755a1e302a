package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// waitCounter counts the round trips a connection's client waits for:
// the Sync and Query messages it sends (each answered by ReadyForQuery),
// read off the protocol's stream of messages (type byte, length).
type waitCounter struct {
	mu    sync.Mutex
	on    bool
	waits int
	hdr   []byte // a message header split across writes
	skip  int    // the rest of the current message's body
	err   error
}

func (c *waitCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on, c.waits, c.hdr, c.skip, c.err = true, 0, nil, 0, nil
}

func (c *waitCounter) count(t *testing.T) int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.waits
}

func (c *waitCounter) sent(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.on && c.err == nil && len(b) > 0 {
		if c.skip > 0 {
			n := min(c.skip, len(b))
			c.skip, b = c.skip-n, b[n:]
			continue
		}
		n := min(5-len(c.hdr), len(b))
		c.hdr, b = append(c.hdr, b[:n]...), b[n:]
		if len(c.hdr) < 5 {
			return
		}
		switch c.hdr[0] {
		case 'S', 'Q':
			c.waits++
		case 'P', 'B', 'D', 'E', 'd', 'c', 'C', 'H', 'f':
		default:
			c.err = fmt.Errorf("client message of type %q: not the protocol's plain stream (TLS?)", c.hdr[0])
		}
		c.skip = int(binary.BigEndian.Uint32(c.hdr[1:])) - 4
		c.hdr = c.hdr[:0]
	}
}

type countedConn struct {
	net.Conn
	c *waitCounter
}

func (cc countedConn) Write(b []byte) (int, error) {
	cc.c.sent(b)
	return cc.Conn.Write(b)
}

// openCounted opens a sink on a new database whose connection counts
// its round trips.
func openCounted(t *testing.T) (*Sink, *waitCounter) {
	t.Helper()
	s := open(t, newDB(t))
	counter := &waitCounter{}
	dial := s.cfg.DialFunc
	s.cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{conn, counter}, nil
	}
	s.conn.Close(t.Context()) // the next batch reconnects through the counter
	return s, counter
}

// TestBatchRoundTrips: a batch of live changes, fenced and with its
// checkpoint, costs one round trip to the destination (its transaction
// opens with the first and commits with the last); one whose BeforeCommit
// must run between its writes and its commit, two; a chunk into an empty
// range three (the range read, the COPY, the commit). A destination far
// away pays each on every batch.
func TestBatchRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, counter := openCounted(t)
	defer s.Close()
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "rt"}, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Type: "integer", TypeOID: 23, BaseOID: 23},
		{Name: "v", Type: "text", TypeOID: 25, BaseOID: 25, Collation: "C"},
	}}
	if err := s.EnsureTable(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	pos := change.LSN(0)
	batch := func(v string) *sink.Batch {
		pos += 10
		b := &sink.Batch{Stream: "s", Position: pos}
		for id := 1; id <= 3; id++ {
			b.Ops = append(b.Ops, sink.Op{Change: &change.Change{Kind: change.Insert, Table: tbl,
				Row: change.Row{change.Text(strconv.Itoa(id)), change.Text(v)}}})
		}
		return b
	}
	// The first batch prepares its statements.
	if err := s.Apply(ctx, batch("a")); err != nil {
		t.Fatal(err)
	}
	counter.reset()
	if err := s.Apply(ctx, batch("b")); err != nil {
		t.Fatal(err)
	}
	if n := counter.count(t); n != 1 {
		t.Errorf("a batch of changes took %d round trips, want 1", n)
	}
	b := batch("c")
	called := false
	b.BeforeCommit = func(context.Context) error { called = true; return nil }
	counter.reset()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := counter.count(t); n != 2 || !called {
		t.Errorf("a batch with a BeforeCommit took %d round trips (called: %v), want 2", n, called)
	}
	// A chunk (its statements prepared by a first one).
	chunk := func(low, high int) *sink.Batch {
		pos += 10
		c := &sink.Chunk{Table: tbl, BackfillID: 1, Low: change.Key{change.Text(strconv.Itoa(low))}, High: change.Key{change.Text(strconv.Itoa(high))}}
		for id := low + 1; id <= high; id++ {
			c.Rows = append(c.Rows, change.Row{change.Text(strconv.Itoa(id)), change.Text("r")})
		}
		return &sink.Batch{Stream: "s", Position: pos, Ops: []sink.Op{{Chunk: c}}}
	}
	if err := s.Apply(ctx, chunk(10, 20)); err != nil {
		t.Fatal(err)
	}
	counter.reset()
	if err := s.Apply(ctx, chunk(20, 30)); err != nil {
		t.Fatal(err)
	}
	if n := counter.count(t); n != 3 {
		t.Errorf("a chunk into an empty range took %d round trips, want 3", n)
	}
	rows, err := s.ReadRange(ctx, tbl, nil, change.Key{change.Text("10")})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.Checkpoint(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][1].Text != "c" || cp.Position != pos {
		t.Errorf("rows %v at position %d, want three of c at %d", rows, cp.Position, pos)
	}
}
