// Package mysql reads MySQL and MariaDB: tables described from
// information_schema, chunks read in key order inside consistent
// snapshots, prerequisite checks, and the row-based binlog streamed as
// committed transactions.
//
// Values leave this package in PostgreSQL's text form for the PostgreSQL
// type each MySQL type maps to (docs/type-mapping.md, MySQL section), made
// by one codec (codec.go) for chunk reads and binlog rows alike. Positions
// are binlog file:offset pairs packed into a change.LSN (position.go), each
// with the GTID state after it as its resume token (gtidset.go, resume.go).
//
// A Source is safe for concurrent use: every operation takes a connection
// of its own from a small idle list, and a cancelled context closes the
// connection it was using.
package mysql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tidemark/tidemark/internal/change"
)

// Source is an open MySQL or MariaDB source.
type Source struct {
	cfg Config
	dsn dsn

	mu     sync.Mutex
	idle   []*client.Conn
	closed bool

	commitMu   sync.Mutex
	lastCommit Commit
	// epoch is the epoch of the positions reported (see position.go).
	epoch   atomic.Uint32
	planMu  sync.Mutex
	planned *plannedResume
	// pinned is the binlog's end PinStart read, with MySQL's
	// gtid_executed there: the GTID state of a stream starting at it.
	pinMu  sync.Mutex
	pinned binlogInfo

	// nums numbers the columns of tables across schema changes
	// (colnums.go); colls are the server's collations by id, read once.
	nums columnNums
	// readers counts the binlog readers running; readTo is the raw
	// position the last one has read the binlog to (chunkshape.go).
	readers atomic.Int32
	readTo  atomic.Uint64
	// listed are the tables ListTables returned last.
	listMu sync.Mutex
	listed map[change.TableID]bool
	collMu sync.Mutex
	colls  map[uint64]collation
}

const maxIdle = 4

// Open checks the DSN and that the server answers.
func Open(ctx context.Context, cfg Config) (*Source, error) {
	d, err := parseDSN(cfg.DSN)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, dsn: d}
	if err := s.with(ctx, func(*client.Conn) error { return nil }); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Source) log() *slog.Logger {
	if s.cfg.Logger != nil {
		return s.cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Database is the database the source reads.
func (s *Source) Database() string { return s.dsn.Database }

// Close closes the idle connections; operations in flight finish on
// theirs, which are then closed.
func (s *Source) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	return nil
}

// sessionSettings are set on every connection: UTC for TIMESTAMP values,
// utf8mb4 for statements, and results in each column's own character set,
// unconverted, so that the codec decodes text exactly as the binlog
// carries it.
var sessionSettings = []string{
	"SET NAMES utf8mb4",
	"SET time_zone = '+00:00'",
	"SET character_set_results = NULL",
}

func (s *Source) connect(ctx context.Context) (*client.Conn, error) {
	c, err := client.ConnectWithContext(ctx, s.dsn.Host, s.dsn.User, s.dsn.Password, s.dsn.Database, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", s.dsn, err)
	}
	for _, q := range sessionSettings {
		if _, err := c.Execute(q); err != nil {
			c.Close()
			return nil, fmt.Errorf("connect to %s: %s: %w", s.dsn, q, err)
		}
	}
	return c, nil
}

// with runs fn on a connection of its own. The connection goes back to
// the idle list when fn succeeds, and is closed when fn fails (its state is
// unknown) or ctx ends while fn runs (closing it is how a statement in
// flight is abandoned: go-mysql's client takes no context).
func (s *Source) with(ctx context.Context, fn func(c *client.Conn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := s.take(ctx)
	if err != nil {
		return err
	}
	// Close the socket only: client.Conn.Close also resets state the
	// statement in flight is using.
	stop := context.AfterFunc(ctx, func() { c.Conn.Conn.Close() })
	err = fn(c)
	if !stop() {
		return errors.Join(ctx.Err(), err)
	}
	if err != nil {
		c.Close()
		return err
	}
	s.put(c)
	return nil
}

func (s *Source) take(ctx context.Context) (*client.Conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("mysql source is closed")
	}
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	return s.connect(ctx)
}

func (s *Source) put(c *client.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.idle) >= maxIdle || c.IsInTransaction() {
		c.Close()
		return
	}
	s.idle = append(s.idle, c)
}

// query runs a statement with bound arguments (a prepared statement when
// there are any) and returns the whole result.
func query(c *client.Conn, sql string, args ...any) (*gomysql.Result, error) {
	r, err := c.Execute(sql, args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// quoteIdent quotes a MySQL identifier with backticks, doubling any inside.
func quoteIdent(name string) string {
	b := make([]byte, 0, len(name)+2)
	b = append(b, '`')
	for i := 0; i < len(name); i++ {
		if name[i] == '`' {
			b = append(b, '`')
		}
		b = append(b, name[i])
	}
	return string(append(b, '`'))
}
