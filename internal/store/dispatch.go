package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// In a cluster the batch leader claims instances and queues their attempts
// in "batch_dispatch"; any node with a free slot takes them, runs them and
// writes how they ended, and the leader records those ends
// (docs/cluster.md). A lone daemon runs its attempts itself and never
// writes here.

// QueuedAttempt is an attempt the leader hands to the nodes: what to run,
// as the batch engine encodes it (without secrets).
type QueuedAttempt struct {
	InstanceID int64
	Attempt    int
	Spec       string
}

// DispatchedAttempt is a queued attempt as the leader reads it back.
type DispatchedAttempt struct {
	InstanceID int64
	Attempt    int
	Node       string // the node that took it; "" while queued
	Epoch      int64  // that node's worker lease epoch
	Stop       bool
	// Result is what the node wrote when the attempt ended; "" before.
	Result string
	// Lost: the node that took it no longer holds its worker lease at
	// Epoch, so it ended its tasks (or died) without writing a result.
	Lost bool
	// Where its processes ran, as the node recorded them at their start.
	Host      string
	PID, PGID int
	ProcStart uint64
}

// WorkerFence is the worker lease a node's batch writes must still hold.
type WorkerFence struct {
	Lease, Node string
	Epoch       int64
}

// WriteBatchDispatch is UpdateBatchInstances for a cluster's leader: in
// the same fenced transaction it queues the attempts of the instances it
// claims and deletes the queue entries of instances that left "running".
func (s *Store) WriteBatchDispatch(ctx context.Context, insts []BatchInstance, queue []QueuedAttempt) error {
	if len(insts) == 0 && len(queue) == 0 {
		return nil
	}
	if err := s.needPostgres(); err != nil {
		return err
	}
	outputs, order, err := prepareInstanceUpdates(insts)
	if err != nil {
		return err
	}
	var done []int64
	for _, in := range insts {
		if in.State != InstanceRunning {
			done = append(done, in.ID)
		}
	}
	err = s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		if len(done) > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM "batch_dispatch" WHERE "instance_id" = ANY($1::bigint[])`, done); err != nil {
				return fmt.Errorf("end queued attempts: %w", err)
			}
		}
		if err := s.updateInstances(ctx, tx, insts, outputs, order); err != nil {
			return err
		}
		return queueAttempts(ctx, tx, queue)
	})
	if err != nil {
		return fmt.Errorf("update batch instances: %w", err)
	}
	return nil
}

// queueAttempts inserts queue entries, replacing an instance's earlier one.
func queueAttempts(ctx context.Context, tx *sql.Tx, queue []QueuedAttempt) error {
	const chunk = 1000 // 3 parameters a row
	for start := 0; start < len(queue); start += chunk {
		part := queue[start:min(start+chunk, len(queue))]
		var q strings.Builder
		q.WriteString(`INSERT INTO "batch_dispatch" ("instance_id", "attempt", "spec") VALUES `)
		args := make([]any, 0, 3*len(part))
		for i, a := range part {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "($%d, $%d, $%d)", 3*i+1, 3*i+2, 3*i+3)
			args = append(args, a.InstanceID, a.Attempt, a.Spec)
		}
		q.WriteString(` ON CONFLICT ("instance_id") DO UPDATE SET "attempt" = excluded."attempt", "spec" = excluded."spec",
			"queued_at" = now(), "node" = NULL, "epoch" = NULL, "claimed_at" = NULL, "stop" = false, "result" = NULL`)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("queue attempts: %w", err)
		}
	}
	if len(queue) > 0 {
		if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, BatchDispatchChannel, NotifyQueued); err != nil {
			return fmt.Errorf("queue attempts: %w", err)
		}
	}
	return nil
}

// BatchDispatchChannel is the NOTIFY channel that wakes nodes when
// attempts are queued or asked to stop, and the leader when one ended.
const BatchDispatchChannel = "tidemark_batch"

// What a notification on BatchDispatchChannel says happened: the workers
// want NotifyQueued and NotifyStop, the leader NotifyEnded (and a stop of
// an attempt no node took, which it is told of directly).
const (
	NotifyQueued = "queued"
	NotifyEnded  = "ended"
	NotifyStop   = "stop"
)

// ClaimBatchAttempts takes up to limit queued attempts, oldest first, for
// the node of fence, skipping rows another node is taking; nothing is taken
// unless the node still holds its worker lease. It takes no more than the
// node's share (claimShare), so that attempts queued together spread over
// the nodes that are up rather than go to whichever asks first.
func (s *Store) ClaimBatchAttempts(ctx context.Context, f WorkerFence, limit int) ([]QueuedAttempt, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	var out []QueuedAttempt
	err := s.writeTx(ctx, "tx batch_claim", func(tx *sql.Tx) error {
		out = out[:0]
		share, err := claimShare(ctx, tx, f)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `UPDATE "batch_dispatch" SET "node" = $1, "epoch" = $2, "claimed_at" = now()
			WHERE "instance_id" IN (SELECT d."instance_id" FROM "batch_dispatch" d WHERE d."node" IS NULL AND d."result" IS NULL
				AND EXISTS (SELECT 1 FROM "batch_instances" b WHERE b."id" = d."instance_id" AND b."attempt" = d."attempt" AND b."state" = 'running')
				ORDER BY d."queued_at", d."instance_id" LIMIT $3 FOR UPDATE OF d SKIP LOCKED)
			RETURNING "instance_id", "attempt", "spec"`, f.Node, f.Epoch, min(limit, share))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a QueuedAttempt
			if err := rows.Scan(&a.InstanceID, &a.Attempt, &a.Spec); err != nil {
				return err
			}
			out = append(out, a)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return s.checkFence(ctx, tx, &leaseFence{lease: f.Lease, node: f.Node, epoch: f.Epoch})
	})
	if err != nil {
		return nil, fmt.Errorf("claim queued attempts: %w", err)
	}
	slices.SortFunc(out, func(a, b QueuedAttempt) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	return out, nil
}

// claimShare is how many attempts the node of f may take now: the
// attempts queued or running, over the nodes whose worker lease is live
// (rounded up), less those the node runs already; at least one. A node
// with a live lease may take nothing (it died a moment ago, or drains its
// attempts as it stops), so attempts queued for claimShareAge or longer
// are anyone's: they are added to the share, and they go first.
func claimShare(ctx context.Context, tx *sql.Tx, f WorkerFence) (int, error) {
	prefix := strings.TrimSuffix(f.Lease, f.Node) // "worker:"
	var open, mine, aged, workers int
	err := tx.QueryRowContext(ctx, `SELECT
			(SELECT pg_catalog.count(*) FROM "batch_dispatch" WHERE "result" IS NULL),
			(SELECT pg_catalog.count(*) FROM "batch_dispatch" WHERE "result" IS NULL AND "node" = $1 AND "epoch" = $2),
			(SELECT pg_catalog.count(*) FROM "batch_dispatch" WHERE "result" IS NULL AND "node" IS NULL
				AND "queued_at" <= now() - $4 * interval '1 millisecond'),
			(SELECT pg_catalog.count(*) FROM "leases" WHERE pg_catalog.left("name", pg_catalog.length($3)) = $3 AND "expires_at" > now())`,
		f.Node, f.Epoch, prefix, claimShareAge.Milliseconds()).Scan(&open, &mine, &aged, &workers)
	if err != nil {
		return 0, fmt.Errorf("count the queue: %w", err)
	}
	share := (open+max(workers, 1)-1)/max(workers, 1) - mine
	return max(share, 1) + aged, nil
}

// claimShareAge is how long a queued attempt waits for the nodes' shares
// before any node may take it: two of a worker's polls.
const claimShareAge = 2 * time.Second

// StartBatchAttempt records where a taken attempt's processes run, before
// anything else happens, so that whoever recovers it can end them. An
// attempt already ended in the queue (stopped, or marked lost) is refused:
// its processes are then ended at once.
func (s *Store) StartBatchAttempt(ctx context.Context, f WorkerFence, id int64, attempt int, host string, pid, pgid int, procStart uint64) error {
	err := s.workerTx(ctx, f, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE "batch_instances" SET "host" = $1, "pid" = $2, "pgid" = $3, "proc_start" = $4, "updated" = TRUE
			WHERE "id" = $5 AND "attempt" = $6 AND "state" = 'running'
			AND EXISTS (SELECT 1 FROM "batch_dispatch" WHERE "instance_id" = $5 AND "attempt" = $6 AND "node" = $7 AND "epoch" = $8
				AND "result" IS NULL)`,
			host, pid, pgid, int64(procStart), id, attempt, f.Node, f.Epoch)
		return oneRow(res, err, id)
	})
	if err != nil {
		return fmt.Errorf("record the start of instance %d attempt %d: %w", id, attempt, err)
	}
	return nil
}

// AttemptEnd is how a taken attempt ended, as its node writes it.
type AttemptEnd struct {
	InstanceID int64
	Attempt    int
	Result     string
}

// EndBatchAttempts writes how taken attempts ended, in one transaction,
// and wakes the leader. It returns those no longer this node's to end
// (the leader stopped one before it was taken, or gave it to another node
// after this one's lease expired); they are not written.
func (s *Store) EndBatchAttempts(ctx context.Context, f WorkerFence, ends []AttemptEnd) (refused []int64, err error) {
	err = s.workerTx(ctx, f, func(tx *sql.Tx) error {
		refused = refused[:0]
		var q strings.Builder
		q.WriteString(`UPDATE "batch_dispatch" AS d SET "result" = v.r FROM (VALUES `)
		args := []any{f.Node, f.Epoch}
		for i, e := range ends {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "($%d::bigint, $%d::int, $%d::text)", len(args)+1, len(args)+2, len(args)+3)
			args = append(args, e.InstanceID, e.Attempt, e.Result)
		}
		q.WriteString(`) AS v(id, a, r) WHERE d."instance_id" = v.id AND d."attempt" = v.a AND d."node" = $1 AND d."epoch" = $2
			AND d."result" IS NULL RETURNING d."instance_id"`)
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		written := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			written[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, e := range ends {
			if !written[e.InstanceID] {
				refused = append(refused, e.InstanceID)
			}
		}
		_, err = tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, BatchDispatchChannel, NotifyEnded)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record the end of %d attempt(s): %w", len(ends), err)
	}
	return refused, nil
}

// workerTx runs f and then the worker fence check in one transaction.
func (s *Store) workerTx(ctx context.Context, f WorkerFence, fn func(*sql.Tx) error) error {
	if err := s.needPostgres(); err != nil {
		return err
	}
	return s.writeTx(ctx, "tx batch_worker", func(tx *sql.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return s.checkFence(ctx, tx, &leaseFence{lease: f.Lease, node: f.Node, epoch: f.Epoch})
	})
}

func oneRow(res sql.Result, err error, id int64) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("instance %d: %w", id, ErrNotFound)
	}
	return nil
}

// StopRequests lists the attempts node took at epoch that the leader asked
// to stop and that have not ended.
func (s *Store) StopRequests(ctx context.Context, f WorkerFence) (map[int64]int, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT "instance_id", "attempt" FROM "batch_dispatch"
		WHERE "node" = $1 AND "epoch" = $2 AND "stop" AND "result" IS NULL`, f.Node, f.Epoch)
	if err != nil {
		return nil, fmt.Errorf("read stop requests: %w", err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id int64
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			return nil, fmt.Errorf("read stop requests: %w", err)
		}
		out[id] = attempt
	}
	return out, rows.Err()
}

// StopBatchAttempt asks the node running an attempt to end it. An attempt
// no node has taken yet ends at once, never to be taken: its end (result)
// is written in the queue, where the leader reads it like any other, and
// unclaimed is true.
func (s *Store) StopBatchAttempt(ctx context.Context, id int64, attempt int, result string) (unclaimed bool, err error) {
	if err := s.needPostgres(); err != nil {
		return false, err
	}
	err = s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		unclaimed = false
		err := tx.QueryRowContext(ctx, `UPDATE "batch_dispatch" SET "stop" = true,
			"result" = CASE WHEN "node" IS NULL THEN $3 ELSE "result" END
			WHERE "instance_id" = $1 AND "attempt" = $2 AND "result" IS NULL RETURNING "node" IS NULL`, id, attempt, result).Scan(&unclaimed)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // it has ended already
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, BatchDispatchChannel, NotifyStop)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("stop instance %d attempt %d: %w", id, attempt, err)
	}
	return unclaimed, nil
}

// MarkAttemptLost writes result as the end of an attempt whose node lost
// the worker lease workerLease, in one transaction that first revokes the
// lease's epoch if it is still past its expiry by the server's clock: a
// heartbeat that began before the expiry can otherwise still renew it,
// and the node would run on under that epoch. lost is false when the
// lease was renewed in time, or when the node wrote an end meanwhile (the
// row lock orders the two writes): the node's end then stands. at is
// where the attempt's processes run, as recorded by then.
func (s *Store) MarkAttemptLost(ctx context.Context, a DispatchedAttempt, workerLease, result string) (lost bool, at DispatchedAttempt, err error) {
	err = s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		lost, at = false, a
		res, err := tx.ExecContext(ctx, `UPDATE "leases" SET "epoch" = "epoch" + 1, "expires_at" = LEAST("expires_at", clock_timestamp())
			WHERE "name" = $1 AND "node" = $2 AND "epoch" = $3 AND "expires_at" <= clock_timestamp()`, workerLease, a.Node, a.Epoch)
		if oneRow(res, err, a.InstanceID) != nil {
			if err != nil {
				return err
			}
			var renewed bool
			err := tx.QueryRowContext(ctx, `SELECT "node" = $2 AND "epoch" = $3 AND "expires_at" > clock_timestamp() FROM "leases" WHERE "name" = $1`,
				workerLease, a.Node, a.Epoch).Scan(&renewed)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if renewed {
				return nil // the node holds it still: not lost
			}
		}
		res, err = tx.ExecContext(ctx, `UPDATE "batch_dispatch" SET "result" = $1
			WHERE "instance_id" = $2 AND "attempt" = $3 AND "node" = $4 AND "epoch" = $5 AND "result" IS NULL`,
			result, a.InstanceID, a.Attempt, a.Node, a.Epoch)
		if oneRow(res, err, a.InstanceID) != nil {
			return err
		}
		var ps int64
		if err := tx.QueryRowContext(ctx, `SELECT "host", "pid", "pgid", "proc_start" FROM "batch_instances" WHERE "id" = $1`, a.InstanceID).
			Scan(&at.Host, &at.PID, &at.PGID, &ps); err != nil {
			return err
		}
		at.ProcStart, lost = uint64(ps), true
		return nil
	})
	if err != nil {
		return false, a, fmt.Errorf("mark instance %d attempt %d lost: %w", a.InstanceID, a.Attempt, err)
	}
	return lost, at, nil
}

// ListBatchDispatch reads the queue: every entry, or (outOnly) those that
// ended or whose node lost its worker lease. workerLease names a node's
// worker lease: the prefix the node's name follows.
func (s *Store) ListBatchDispatch(ctx context.Context, workerLease string, outOnly bool) ([]DispatchedAttempt, error) {
	if err := s.needPostgres(); err != nil {
		return nil, err
	}
	q := `SELECT * FROM (SELECT d."instance_id", d."attempt", COALESCE(d."node", ''), COALESCE(d."epoch", 0), d."stop", COALESCE(d."result", '') AS result,
			d."node" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "leases" l WHERE l."name" = $1 || d."node"
				AND l."node" = d."node" AND l."epoch" = d."epoch" AND l."expires_at" > now()) AS lost,
			b."host", b."pid", b."pgid", b."proc_start"
		FROM "batch_dispatch" d JOIN LATERAL (SELECT i."host", i."pid", i."pgid", i."proc_start" FROM "batch_instances" i
			WHERE i."id" = d."instance_id" AND i."attempt" = d."attempt" LIMIT 1) AS b ON true) AS q`
	if outOnly {
		q += ` WHERE q.lost OR q.result <> ''`
	}
	rows, err := s.db.QueryContext(ctx, q, workerLease)
	if err != nil {
		return nil, fmt.Errorf("read queued attempts: %w", err)
	}
	defer rows.Close()
	var out []DispatchedAttempt
	for rows.Next() {
		var a DispatchedAttempt
		var ps int64
		if err := rows.Scan(&a.InstanceID, &a.Attempt, &a.Node, &a.Epoch, &a.Stop, &a.Result, &a.Lost, &a.Host, &a.PID, &a.PGID, &ps); err != nil {
			return nil, fmt.Errorf("read queued attempts: %w", err)
		}
		a.ProcStart = uint64(ps)
		out = append(out, a)
	}
	return out, rows.Err()
}

// TidyBatchDispatch vacuums the queue. Every claim moves a row out of the
// queue's partial index and every end deletes one, and until the table is
// vacuumed the dead entries stay: a claim's scan visits all of them (5,401
// after 6,000 no-op attempts), and autovacuum comes a minute apart at best.
// It neither waits for a lock another holds (an autovacuum's: it is done
// then anyway) nor truncates the table, which would lock out claims and
// ends for a moment.
func (s *Store) TidyBatchDispatch(ctx context.Context) error {
	if err := s.needPostgres(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.db.ExecContext(ctx, `VACUUM (SKIP_LOCKED, TRUNCATE false) "batch_dispatch"`); err != nil {
		return fmt.Errorf("vacuum the queue of attempts: %w", err)
	}
	return nil
}
