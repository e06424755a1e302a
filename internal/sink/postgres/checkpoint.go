package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

const (
	upsertPositionSQL = `INSERT INTO "_tidemark"."checkpoint" ("stream", "position", "resume", "updated_at")
		VALUES ($1, $2, $3, now())
		ON CONFLICT ("stream") DO UPDATE SET "position" = EXCLUDED."position", "resume" = EXCLUDED."resume",
		"updated_at" = EXCLUDED."updated_at"`
	upsertCursorSQL = `INSERT INTO "_tidemark"."cursor"
		("stream", "schema_name", "table_name", "backfill_id", "after_key", "done", "rows", "updated_at")
		VALUES ($1, $2, $3, $4, $5, $6, $7, now())
		ON CONFLICT ("stream", "schema_name", "table_name") DO UPDATE SET
		"backfill_id" = EXCLUDED."backfill_id", "after_key" = EXCLUDED."after_key",
		"done" = EXCLUDED."done", "rows" = EXCLUDED."rows", "updated_at" = EXCLUDED."updated_at"`
	deleteCursorSQL = `DELETE FROM "_tidemark"."cursor"
		WHERE "stream" = $1 AND "schema_name" = $2 AND "table_name" = $3`
)

// Checkpoint reads the committed position and cursors of a stream.
func (s *Sink) Checkpoint(ctx context.Context, stream string) (sink.Checkpoint, error) {
	cp, err := s.checkpoint(ctx, stream)
	if err != nil {
		return sink.Checkpoint{}, fmt.Errorf("read checkpoint of stream %q: %w", stream, err)
	}
	return cp, nil
}

func (s *Sink) checkpoint(ctx context.Context, stream string) (sink.Checkpoint, error) {
	var cp sink.Checkpoint
	if err := s.ensureConn(ctx); err != nil {
		return cp, err
	}
	var pos int64
	err := s.conn.QueryRow(ctx, `SELECT "position", "resume" FROM "_tidemark"."checkpoint" WHERE "stream" = $1`,
		stream).Scan(&pos, &cp.Resume)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return cp, err
	}
	cp.Position = change.LSN(uint64(pos))
	rows, err := s.conn.Query(ctx, `SELECT "schema_name", "table_name", "backfill_id", "after_key"::text, "done", "rows"
		FROM "_tidemark"."cursor" WHERE "stream" = $1`, stream)
	if err != nil {
		return cp, err
	}
	defer rows.Close()
	for rows.Next() {
		var id change.TableID
		var cur sink.Cursor
		var after []byte
		if err := rows.Scan(&id.Schema, &id.Name, &cur.BackfillID, &after, &cur.Done, &cur.Rows); err != nil {
			return cp, err
		}
		if err := cp.AddCursor(id, cur, after); err != nil {
			return cp, err
		}
	}
	return cp, rows.Err()
}

// queueCheckpoint queues the batch's position (with its resume token) and
// cursor changes. A zero position means the batch carries none, and leaves
// the stored one alone.
func (s *Sink) queueCheckpoint(ctx context.Context, p *pipeline, b *sink.Batch) error {
	if b.Position != 0 {
		pos := strconv.FormatInt(int64(b.Position), 10)
		if err := p.queue(ctx, upsertPositionSQL, [][]byte{[]byte(b.Stream), []byte(pos), []byte(b.Resume)}, "write position"); err != nil {
			return err
		}
	}
	ids := make([]change.TableID, 0, len(b.Cursors))
	for id := range b.Cursors {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		cur := b.Cursors[id]
		what := "write cursor of " + id.String()
		args := [][]byte{textBytes(b.Stream), textBytes(id.Schema), textBytes(id.Name)}
		if cur.BackfillID == 0 {
			if err := p.queue(ctx, deleteCursorSQL, args, what); err != nil {
				return err
			}
			continue
		}
		after, err := sink.MarshalKey(cur.After)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		args = append(args, []byte(strconv.FormatInt(cur.BackfillID, 10)), after,
			[]byte(strconv.FormatBool(cur.Done)), []byte(strconv.FormatInt(cur.Rows, 10)))
		if err := p.queue(ctx, upsertCursorSQL, args, what); err != nil {
			return err
		}
	}
	return nil
}
