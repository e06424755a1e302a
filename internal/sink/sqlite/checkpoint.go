package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// checkpointDDL creates the checkpoint tables. Positions are LSNs stored bit
// for bit in a 64-bit INTEGER, beside the source's resume token; after_key is the cursor key as a JSON array
// of {"t": text, "n": is-null}.
var checkpointDDL = []string{
	`CREATE TABLE IF NOT EXISTS "_tidemark_checkpoint" (
		"stream" TEXT NOT NULL PRIMARY KEY,
		"position" INTEGER NOT NULL,
		"resume" TEXT NOT NULL DEFAULT '',
		"updated_at" TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS "_tidemark_cursor" (
		"stream" TEXT NOT NULL,
		"schema_name" TEXT NOT NULL,
		"table_name" TEXT NOT NULL,
		"backfill_id" INTEGER NOT NULL,
		"after_key" TEXT,
		"done" INTEGER NOT NULL,
		"rows" INTEGER NOT NULL,
		"updated_at" TEXT NOT NULL,
		PRIMARY KEY ("stream", "schema_name", "table_name"))`,
}

const (
	upsertPositionSQL = `INSERT INTO "_tidemark_checkpoint" ("stream", "position", "resume", "updated_at")
		VALUES (?, ?, ?, strftime('%Y-%m-%d %H:%M:%f', 'now'))
		ON CONFLICT ("stream") DO UPDATE SET "position" = excluded."position", "resume" = excluded."resume",
		"updated_at" = excluded."updated_at"`
	upsertCursorSQL = `INSERT INTO "_tidemark_cursor"
		("stream", "schema_name", "table_name", "backfill_id", "after_key", "done", "rows", "updated_at")
		VALUES (?, ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%d %H:%M:%f', 'now'))
		ON CONFLICT ("stream", "schema_name", "table_name") DO UPDATE SET
		"backfill_id" = excluded."backfill_id", "after_key" = excluded."after_key",
		"done" = excluded."done", "rows" = excluded."rows", "updated_at" = excluded."updated_at"`
	deleteCursorSQL = `DELETE FROM "_tidemark_cursor"
		WHERE "stream" = ? AND "schema_name" = ? AND "table_name" = ?`
	selectPositionSQL = `SELECT "position", "resume" FROM "_tidemark_checkpoint" WHERE "stream" = ?`
	selectCursorsSQL  = `SELECT "schema_name", "table_name", "backfill_id", "after_key", "done", "rows"
		FROM "_tidemark_cursor" WHERE "stream" = ?`
)

// writeCheckpoint writes the batch's position (with its resume token) and
// cursor changes. A zero
// position means the batch carries none, and leaves the stored one alone.
func (s *Sink) writeCheckpoint(ctx context.Context, w *txn, b *sink.Batch) error {
	if b.Position != 0 {
		if _, err := w.ExecContext(ctx, upsertPositionSQL, b.Stream, int64(b.Position), b.Resume); err != nil {
			return fmt.Errorf("write position: %w", err)
		}
	}
	ids := make([]change.TableID, 0, len(b.Cursors))
	for id := range b.Cursors {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		cur := b.Cursors[id]
		var err error
		if cur.BackfillID == 0 {
			_, err = w.ExecContext(ctx, deleteCursorSQL, b.Stream, id.Schema, id.Name)
		} else {
			var after any
			if after, err = encodeKey(cur.After); err == nil {
				_, err = w.ExecContext(ctx, upsertCursorSQL, b.Stream, id.Schema, id.Name,
					cur.BackfillID, after, cur.Done, cur.Rows)
			}
		}
		if err != nil {
			return fmt.Errorf("write cursor of %s: %w", id, err)
		}
	}
	return nil
}

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
	var pos int64
	err := s.db.QueryRowContext(ctx, selectPositionSQL, stream).Scan(&pos, &cp.Resume)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return cp, err
	}
	cp.Position = change.LSN(uint64(pos))
	rows, err := s.db.QueryContext(ctx, selectCursorsSQL, stream)
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

// ensureResumeColumn adds the resume column to a checkpoint table created
// before resume tokens were stored; its rows read as an empty token, which
// resumes by position alone.
func ensureResumeColumn(ctx context.Context, db *sql.DB) error {
	var has bool
	err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pragma_table_info('_tidemark_checkpoint')
		WHERE "name" = 'resume')`).Scan(&has)
	if err != nil {
		return fmt.Errorf("look up the resume column of the checkpoint table: %w", err)
	}
	if has {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE "_tidemark_checkpoint" ADD COLUMN "resume" TEXT NOT NULL DEFAULT ''`); err != nil {
		return fmt.Errorf("add the resume column to the checkpoint table: %w", err)
	}
	return nil
}

// encodeKey renders a cursor key for the cursor table; a nil key is NULL.
func encodeKey(k change.Key) (any, error) {
	b, err := sink.MarshalKey(k)
	if b == nil || err != nil {
		return nil, err
	}
	return string(b), nil
}
