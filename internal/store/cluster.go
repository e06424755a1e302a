package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Several nodes share a PostgreSQL store (docs/cluster.md). Every time here
// is the metadata server's now(): nodes' clocks need not agree, and a lease
// ends at the same instant for every node that reads it.

// ErrFenced means a lease this node held has passed to another node (or
// expired): what it was about to write is refused. Test with errors.Is.
var ErrFenced = errors.New("fenced: this node no longer holds the lease")

// ErrClusterNeedsPostgres refuses cluster operations on a SQLite store.
var ErrClusterNeedsPostgres = errors.New("several nodes need a PostgreSQL metadata store (metadata: postgres://…); a SQLite store serves one daemon")

// Node is one daemon of a cluster, as it recorded itself.
type Node struct {
	Name       string    `json:"name"`
	Host       string    `json:"host"`
	PID        int       `json:"pid"`
	API        string    `json:"api"`
	ConfigHash string    `json:"config_hash"`
	StartedAt  time.Time `json:"started_at"`
	Heartbeat  time.Time `json:"heartbeat_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	// Live is false once the node's heartbeat is older than its lease time.
	Live bool `json:"live"`
}

// Lease is the right to do one thing on one node at a time: run a stream
// ("stream:<name>") or lead the batch engine ("batch").
type Lease struct {
	Name       string    `json:"name"`
	Node       string    `json:"node"`
	Epoch      int64     `json:"epoch"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Live       bool      `json:"live"`
}

// NodeTakenError refuses a node whose name a live node uses.
type NodeTakenError struct{ Holder Node }

func (e *NodeTakenError) Error() string {
	h := e.Holder
	return fmt.Sprintf("node name %q is in use by a live tidemark node (host %s, pid %d, running since %s): give this node another name (cluster.node), or stop that one first",
		h.Name, h.Host, h.PID, h.StartedAt.Format(time.RFC3339))
}

// ConfigMismatchError refuses a node whose configuration differs from the
// live nodes': every node must run the same streams and tasks.
type ConfigMismatchError struct {
	Node       string // a live node with another configuration
	Hash, Want string
}

func (e *ConfigMismatchError) Error() string {
	return fmt.Sprintf("this node's configuration (fingerprint %s) differs from that of live node %q (%s): every node must run the same configuration file, apart from its cluster.node; deploy the same file to every node",
		e.Hash, e.Node, e.Want)
}

// joinLockKey is the advisory lock that serialises joins ("tidemarj").
const joinLockKey = 0x746964656d61726a

// millis is a lease time as a query argument.
func millis(d time.Duration) int64 { return d.Milliseconds() }

func (s *Store) needPostgres() error {
	if s.d.name != dialectPostgres {
		return ErrClusterNeedsPostgres
	}
	return nil
}

// JoinCluster records n as a live node for ttl, refusing a name a live node
// holds and a configuration that differs from the live nodes'. It returns
// the node as recorded (the server's times): StartedAt identifies this
// incarnation in Heartbeat and LeaveCluster.
func (s *Store) JoinCluster(ctx context.Context, n Node, ttl time.Duration) (Node, error) {
	if err := s.needPostgres(); err != nil {
		return Node{}, err
	}
	var out Node
	err := s.writeTx(ctx, "tx cluster", func(tx *sql.Tx) error {
		// One join at a time: two nodes of different configurations
		// starting together must not both pass the check below.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(`+fmt.Sprint(joinLockKey)+`)`); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT "name", "config_hash" FROM "nodes" WHERE "expires_at" > now() AND "name" <> ? ORDER BY "name"`), n.Name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name, hash string
			if err := rows.Scan(&name, &hash); err != nil {
				return err
			}
			if hash != n.ConfigHash {
				return &ConfigMismatchError{Node: name, Hash: n.ConfigHash, Want: hash}
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		row := tx.QueryRowContext(ctx, s.d.rebind(`INSERT INTO "nodes" AS n ("name", "host", "pid", "api", "config_hash", "started_at", "heartbeat_at", "expires_at")
			VALUES (?, ?, ?, ?, ?, clock_timestamp(), clock_timestamp(), clock_timestamp() + ? * interval '1 millisecond')
			ON CONFLICT ("name") DO UPDATE SET "host" = EXCLUDED."host", "pid" = EXCLUDED."pid", "api" = EXCLUDED."api",
				"config_hash" = EXCLUDED."config_hash", "started_at" = EXCLUDED."started_at",
				"heartbeat_at" = EXCLUDED."heartbeat_at", "expires_at" = EXCLUDED."expires_at"
			WHERE n."expires_at" <= now()
			RETURNING "started_at"`), n.Name, n.Host, n.PID, n.API, n.ConfigHash, millis(ttl))
		var started timeCol
		if err := row.Scan(&started); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				held, err := s.node(ctx, tx, n.Name)
				if err != nil {
					return err
				}
				return &NodeTakenError{Holder: held}
			}
			return err
		}
		out = n
		out.StartedAt = started.T
		return nil
	})
	if err != nil {
		return Node{}, fmt.Errorf("join the cluster as node %q: %w", n.Name, err)
	}
	return out, nil
}

func (s *Store) node(ctx context.Context, tx *sql.Tx, name string) (Node, error) {
	nodes, err := s.scanNodes(ctx, tx, `WHERE "name" = ?`, name)
	if err != nil {
		return Node{}, err
	}
	if len(nodes) == 0 {
		return Node{}, fmt.Errorf("node %q: %w", name, ErrNotFound)
	}
	return nodes[0], nil
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func (s *Store) scanNodes(ctx context.Context, q querier, where string, args ...any) ([]Node, error) {
	rows, err := q.QueryContext(ctx, s.d.rebind(`SELECT "name", "host", "pid", "api", "config_hash", "started_at", "heartbeat_at", "expires_at",
		"expires_at" > now() FROM "nodes" `+where+` ORDER BY "name"`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var started, beat, expires timeCol
		if err := rows.Scan(&n.Name, &n.Host, &n.PID, &n.API, &n.ConfigHash, &started, &beat, &expires, &n.Live); err != nil {
			return nil, err
		}
		n.StartedAt, n.Heartbeat, n.ExpiresAt = started.T, beat.T, expires.T
		out = append(out, n)
	}
	return out, rows.Err()
}

// Heartbeat renews node (the incarnation that started at started) and every
// lease it still holds for ttl, in one transaction, and returns those
// leases by name with their epochs. A lease missing from the answer was
// lost: it expired, or another node took it. ErrFenced means the node's
// own record was taken over (its name rejoined after it expired).
func (s *Store) Heartbeat(ctx context.Context, node string, started time.Time, ttl time.Duration) (map[string]int64, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	held := map[string]int64{}
	err := s.writeTx(ctx, "tx cluster", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE "nodes" SET "heartbeat_at" = clock_timestamp(),
			"expires_at" = clock_timestamp() + ? * interval '1 millisecond' WHERE "name" = ? AND "started_at" = ?`),
			millis(ttl), node, s.d.timeArg(started))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("node %q was taken over after its record expired: %w", node, ErrFenced))
		}
		rows, err := tx.QueryContext(ctx, s.d.rebind(`UPDATE "leases" SET "expires_at" = clock_timestamp() + ? * interval '1 millisecond'
			WHERE "node" = ? AND "expires_at" > now() RETURNING "name", "epoch"`), millis(ttl), node)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var epoch int64
			if err := rows.Scan(&name, &epoch); err != nil {
				return err
			}
			held[name] = epoch
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat of node %q: %w", node, err)
	}
	return held, nil
}

// AcquireLease gives lease name to node for ttl if nobody holds it or its
// holder let it expire, with an epoch one above the last. ok is false when
// another node holds it. A held lease is not locked by the attempt (an
// UPDATE skips rows its condition excludes; an upsert would wait on them),
// so asking never waits for the holder's fenced writes.
func (s *Store) AcquireLease(ctx context.Context, name, node string, ttl time.Duration) (epoch int64, ok bool, err error) {
	if err := s.needPostgres(); err != nil {
		return 0, false, err
	}
	err = s.queryRow(ctx, `UPDATE "leases" SET "node" = ?, "epoch" = "epoch" + 1, "acquired_at" = clock_timestamp(),
		"expires_at" = clock_timestamp() + ? * interval '1 millisecond'
		WHERE "name" = ? AND "expires_at" <= now() RETURNING "epoch"`, node, millis(ttl), name).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		// Held, or never taken: a first holder inserts it.
		err = s.queryRow(ctx, `INSERT INTO "leases" ("name", "node", "epoch", "acquired_at", "expires_at")
			VALUES (?, ?, 1, clock_timestamp(), clock_timestamp() + ? * interval '1 millisecond')
			ON CONFLICT ("name") DO NOTHING RETURNING "epoch"`, name, node, millis(ttl)).Scan(&epoch)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return epoch, true, nil
}

// ReleaseLease ends node's lease name of epoch at once, so that another
// node may take it without waiting for it to expire. The row stays, with
// its epoch, so the next holder's is higher.
func (s *Store) ReleaseLease(ctx context.Context, name, node string, epoch int64) error {
	if err := s.needPostgres(); err != nil {
		return err
	}
	_, err := s.exec(ctx, `UPDATE "leases" SET "expires_at" = now() WHERE "name" = ? AND "node" = ? AND "epoch" = ?`, name, node, epoch)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaveCluster ends node's record and every lease it holds.
func (s *Store) LeaveCluster(ctx context.Context, node string, started time.Time) error {
	if err := s.needPostgres(); err != nil {
		return err
	}
	err := s.writeTx(ctx, "tx cluster", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE "nodes" SET "expires_at" = now() WHERE "name" = ? AND "started_at" = ?`), node, s.d.timeArg(started))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // taken over: its leases are no longer this incarnation's
		}
		_, err = tx.ExecContext(ctx, s.d.rebind(`UPDATE "leases" SET "expires_at" = now() WHERE "node" = ? AND "expires_at" > now()`), node)
		return err
	})
	if err != nil {
		return fmt.Errorf("leave the cluster as node %q: %w", node, err)
	}
	return nil
}

// ClusterNodes lists every node recorded, live or not, by name.
func (s *Store) ClusterNodes(ctx context.Context) ([]Node, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	nodes, err := s.scanNodes(ctx, s.db, "")
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

// Leases lists every lease, held or not, by name.
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, `SELECT "name", "node", "epoch", "acquired_at", "expires_at", "expires_at" > now() FROM "leases" ORDER BY "name"`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var acq, exp timeCol
		if err := rows.Scan(&l.Name, &l.Node, &l.Epoch, &acq, &exp, &l.Live); err != nil {
			return nil, fmt.Errorf("list leases: %w", err)
		}
		l.AcquiredAt, l.ExpiresAt = acq.T, exp.T
		out = append(out, l)
	}
	return out, rows.Err()
}

// leaseFence is the lease every batch write must still hold.
type leaseFence struct {
	lease, node string
	epoch       int64
}

// FenceBatchWrites makes every later batch write (the batch engine's
// records) check, in its own transaction, that node still holds lease at
// epoch, and fail with ErrFenced if not; epoch 0 removes the check. The
// check takes a share lock on the lease row, so a takeover waits for a
// write in progress and no write commits after it.
func (s *Store) FenceBatchWrites(lease, node string, epoch int64) {
	if epoch == 0 {
		s.fence.Store(nil)
		return
	}
	s.fence.Store(&leaseFence{lease: lease, node: node, epoch: epoch})
}

type writeFenceKey struct{}

// WithWriteFence makes every write of the store under ctx (a stream's
// records and its backfills; counters go without, see WithoutWriteFence,
// but for those RecordCommit writes with its runs)
// check, in its own transaction, that node still holds lease at epoch,
// and fail with ErrFenced if not: a cluster node woken from a freeze
// cannot write for work another node has taken over. The check takes a
// share lock on the lease row, so a takeover waits for a write in progress
// and no write commits after it.
func WithWriteFence(ctx context.Context, lease, node string, epoch int64) context.Context {
	return context.WithValue(ctx, writeFenceKey{}, &leaseFence{lease: lease, node: node, epoch: epoch})
}

// WithoutWriteFence is ctx without its write fence: for counters, which
// add up (a frozen node may add those of a batch the destination then
// refused) and are written after every destination commit.
func WithoutWriteFence(ctx context.Context) context.Context {
	return context.WithValue(ctx, writeFenceKey{}, (*leaseFence)(nil))
}

// writeFenceOf is ctx's write fence; nil without one, and on SQLite,
// which serves no cluster.
func (s *Store) writeFenceOf(ctx context.Context) *leaseFence {
	if s.d.name != dialectPostgres {
		return nil
	}
	f, _ := ctx.Value(writeFenceKey{}).(*leaseFence)
	return f
}

// checkWriteFence runs ctx's write fence check, if any, in tx.
func (s *Store) checkWriteFence(ctx context.Context, tx *sql.Tx) error {
	if f := s.writeFenceOf(ctx); f != nil {
		return s.checkFence(ctx, tx, f)
	}
	return nil
}

// fencedTx runs fn in a transaction that first checks fence f.
func (s *Store) fencedTx(ctx context.Context, f *leaseFence, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.checkFence(ctx, tx, f); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// checkFenceTx runs the FenceBatchWrites check, if a fence is set, in tx.
func (s *Store) checkFenceTx(ctx context.Context, tx *sql.Tx) error {
	if f := s.fence.Load(); f != nil {
		return s.checkFence(ctx, tx, f)
	}
	return nil
}

// checkFence runs the FenceBatchWrites check in tx.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, f *leaseFence) error {
	var one int
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT 1 FROM "leases" WHERE "name" = ? AND "node" = ? AND "epoch" = ? AND "expires_at" > now() FOR SHARE`),
		f.lease, f.node, f.epoch).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("node %q, lease %s epoch %d: %w", f.node, f.lease, f.epoch, ErrFenced)
	}
	return err
}

// LeaseHolder returns the live node holding lease name; ok is false when
// no live node does.
func (s *Store) LeaseHolder(ctx context.Context, lease string) (n Node, ok bool, err error) {
	if err := s.needPostgres(); err != nil {
		return Node{}, false, err
	}
	nodes, err := s.scanNodes(ctx, s.db, `WHERE "expires_at" > now() AND "name" = (SELECT "node" FROM "leases" WHERE "name" = ? AND "expires_at" > now())`, lease)
	if err != nil {
		return Node{}, false, fmt.Errorf("look up the holder of lease %s: %w", lease, err)
	}
	if len(nodes) == 0 {
		return Node{}, false, nil
	}
	return nodes[0], true, nil
}
