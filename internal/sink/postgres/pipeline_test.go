package postgres

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// turnCounter counts a connection's round trips: each time the client
// writes after it read (or first).
type turnCounter struct {
	mu     sync.Mutex
	turns  int
	reread bool
}

func (c *turnCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.turns, c.reread = 0, true
}

func (c *turnCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turns
}

type countedConn struct {
	net.Conn
	c *turnCounter
}

func (cc countedConn) Write(b []byte) (int, error) {
	cc.c.mu.Lock()
	if cc.c.reread {
		cc.c.turns++
		cc.c.reread = false
	}
	cc.c.mu.Unlock()
	return cc.Conn.Write(b)
}

func (cc countedConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	cc.c.mu.Lock()
	cc.c.reread = true
	cc.c.mu.Unlock()
	return n, err
}

// TestBatchRoundTrips: a batch of live changes, fenced and with its
// checkpoint, costs one round trip to the destination (its transaction
// opens with the first and commits with the last); one whose BeforeCommit
// must run between its writes and its commit, two. A destination far away
// pays each on every batch.
func TestBatchRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, newDB(t))
	defer s.Close()
	counter := &turnCounter{}
	dial := s.cfg.DialFunc
	s.cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{conn, counter}, nil
	}
	s.conn.Close(ctx) // the next batch reconnects through the counter
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
	if n := counter.count(); n != 1 {
		t.Errorf("a batch of changes took %d round trips, want 1", n)
	}
	b := batch("c")
	called := false
	b.BeforeCommit = func(context.Context) error { called = true; return nil }
	counter.reset()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := counter.count(); n != 2 || !called {
		t.Errorf("a batch with a BeforeCommit took %d round trips (called: %v), want 2", n, called)
	}
	rows, err := s.ReadRange(ctx, tbl, nil, nil)
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
