package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/sink"
)

var _ sink.Fencer = (*Sink)(nil)

const (
	createFenceSQL = `CREATE TABLE IF NOT EXISTS "_tidemark"."fence" (
		"stream" text PRIMARY KEY,
		"epoch" bigint NOT NULL,
		"updated_at" timestamptz NOT NULL DEFAULT now())`
	// takeFenceSQL waits on the row lock an older owner's transaction holds
	// (checkFenceSQL's), so its commit lands before this one reads.
	takeFenceSQL = `INSERT INTO "_tidemark"."fence" AS f ("stream", "epoch") VALUES ($1, $2)
		ON CONFLICT ("stream") DO UPDATE SET "epoch" = EXCLUDED."epoch", "updated_at" = now()
		WHERE f."epoch" <= EXCLUDED."epoch" RETURNING "epoch"`
	// checkFenceSQL share-locks the stream's fence row for the
	// transaction; it finds no row when another epoch holds it. A share
	// lock, not a row update: a stream's chunk lane and its live writer
	// commit at once (sink.ChunkLaner) and must not wait for each other,
	// while takeFenceSQL's update still waits for both.
	checkFenceSQL = `SELECT 1 FROM "_tidemark"."fence" WHERE "stream" = $1 AND "epoch" = $2 FOR SHARE`
	// holdFenceSQL is checkFenceSQL that fails the transaction (division
	// by zero, as the comment in the server's log says) when it finds no
	// row.
	holdFenceSQL   = `SELECT 1 / count(*)::int /* zero: a newer owner fenced this stream off */ FROM (` + checkFenceSQL + `) AS "held"`
	divisionByZero = "22012"
)

// fence is the epoch this sink's batches must still hold (0: none).
type fence struct {
	stream string
	epoch  int64
}

// Fence implements sink.Fencer. It names this sink's sessions after the
// stream and first ends the stream's other sessions on the destination (of
// this role, as every node connects with the stream's one role): a
// former owner frozen inside a transaction holds the fence row's lock, and
// would otherwise hold the new owner up until it woke.
func (s *Sink) Fence(ctx context.Context, stream string, epoch int64) error {
	app := "tidemark " + stream                   // ≤ 57 bytes: PostgreSQL keeps 63
	s.cfg.RuntimeParams["application_name"] = app // for reconnections too
	if err := s.ensureConn(ctx); err != nil {
		return fmt.Errorf("fence stream %q: %w", stream, err)
	}
	if _, err := s.conn.Exec(ctx, `SELECT set_config('application_name', $1, false)`, app); err != nil {
		return fmt.Errorf("fence stream %q: %w", stream, err)
	}
	if _, err := s.conn.Exec(ctx, createFenceSQL); err != nil {
		return fmt.Errorf("fence stream %q: create the fence table: %w", stream, err)
	}
	// A newer owner's sessions are not this one's to end: look first (a
	// plain read, which no lock holds up).
	var newest int64
	err := s.conn.QueryRow(ctx, `SELECT coalesce(max("epoch"), 0) FROM "_tidemark"."fence" WHERE "stream" = $1`, stream).Scan(&newest)
	if err != nil {
		return fmt.Errorf("fence stream %q: %w", stream, err)
	}
	if newest > epoch {
		return fmt.Errorf("fence stream %q at epoch %d (the destination has %d): %w", stream, epoch, newest, sink.ErrFenced)
	}
	var ended int
	err = s.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1 AND usename = current_user AND pid <> pg_backend_pid()`, app).Scan(&ended)
	if err != nil {
		return fmt.Errorf("fence stream %q: end the former owner's sessions: %w", stream, err)
	}
	var got int64
	err = s.conn.QueryRow(ctx, takeFenceSQL, stream, epoch).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fence stream %q at epoch %d: %w", stream, epoch, sink.ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("fence stream %q: %w", stream, err)
	}
	s.fence = fence{stream: stream, epoch: epoch}
	return nil
}

// checkFence runs the fence check in the transaction open on the
// connection, locking the fence row until it ends.
func (s *Sink) checkFence(ctx context.Context) error {
	if s.fence.epoch == 0 {
		return nil
	}
	tag, err := s.conn.Exec(ctx, checkFenceSQL, s.fence.stream, s.fence.epoch)
	if err != nil {
		return fmt.Errorf("check the stream's fence: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("stream %q, epoch %d: %w", s.fence.stream, s.fence.epoch, sink.ErrFenced)
	}
	return nil
}

// queueFenceCheck queues the fence check first in a batch's transaction.
// When another epoch holds the fence it fails the transaction, so the
// commit queued behind it in the same round trip never runs.
func (s *Sink) queueFenceCheck(ctx context.Context, p *pipeline) error {
	if s.fence.epoch == 0 {
		return nil
	}
	args := [][]byte{[]byte(s.fence.stream), []byte(strconv.FormatInt(s.fence.epoch, 10))}
	return p.queueStep(ctx, holdFenceSQL, args, step{what: "check the stream's fence", fail: func(err error) error {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == divisionByZero {
			// Not wrapped: the server's error is no rejection of the batch.
			return fmt.Errorf("stream %q, epoch %d: %w", s.fence.stream, s.fence.epoch, sink.ErrFenced)
		}
		return fmt.Errorf("check the stream's fence: %w", err)
	}})
}
