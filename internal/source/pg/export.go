package pg

import (
	"cmp"
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pglogrepl"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
)

// ExportLog creates the replication slot with an exported snapshot: the
// snapshot sees exactly the transactions committed before the slot's
// consistent point, from which the slot streams. The snapshot lives as
// long as the connection that created the slot stays open and idle, so
// the Export keeps it; closing the Export closes the connection. Until
// then the source's cleanup horizon (xmin) is held back.
func (s *Source) ExportLog(ctx context.Context) (*source.Export, error) {
	conn, err := s.replicationConn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, s.cfg.Slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, classify(fmt.Errorf("create replication slot %s: %w", s.cfg.Slot, err))
	}
	pos, err := change.ParseLSN(res.ConsistentPoint)
	if err == nil && !snapshotName.MatchString(res.SnapshotName) {
		err = fmt.Errorf("the server named the snapshot %q, not as PostgreSQL does", res.SnapshotName)
	}
	if err != nil {
		// The slot stays: the next start finds it and streams from it.
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create replication slot %s: %w", s.cfg.Slot, err)
	}
	s.log.Info("created replication slot with an exported snapshot", logkey.Slot(s.cfg.Slot), "snapshot", res.SnapshotName, "lsn", res.ConsistentPoint)
	return source.NewExport(res.SnapshotName, pos, func() { conn.Close(context.Background()) }), nil
}

// snapshotName is the form of an exported snapshot's name (hexadecimal
// virtual transaction id and a sequence number): SET TRANSACTION SNAPSHOT
// takes no parameter, so the name is checked before it is written into
// the statement.
var snapshotName = regexp.MustCompile(`^[0-9A-F]{1,8}-[0-9A-F]{1,16}(-[0-9]{1,10})?$`)

// ReadChunkIn reads a chunk as ReadChunk does, in exp's snapshot, its
// position exp's. The table must be the one the snapshot shows: a table
// whose storage was rewritten since (TRUNCATE, a rewriting ALTER TABLE),
// or that did not exist then, shows an old snapshot no rows or none of
// its own, and is ErrNotInSnapshot.
func (s *Source) ReadChunkIn(ctx context.Context, exp *source.Export, t *change.Table, opt ReadOptions) (Chunk, error) {
	if !snapshotName.MatchString(exp.Name) {
		return Chunk{}, fmt.Errorf("read chunk of %s: snapshot name %q: %w", t.ID, exp.Name, source.ErrNotInSnapshot)
	}
	dc, err := s.defaultCollation(ctx)
	if err != nil {
		return Chunk{}, err
	}
	chunk, err := s.inSnapshot(ctx, "read chunk of "+t.ID.String()+" in the exported snapshot", func(tx *readTx) (Chunk, error) {
		if _, err := tx.pgConn().Exec(ctx, "SET TRANSACTION SNAPSHOT '"+exp.Name+"'").ReadAll(); err != nil {
			return Chunk{}, err
		}
		// The check follows openChunk's lock: no rewrite can come
		// between it and the read. A table the snapshot does not know
		// fails openChunk (no columns): the check then says why.
		chunk, openErr := openChunk(ctx, tx, t, dc)
		if err := sameStorage(ctx, tx, t.ID); err != nil || openErr != nil {
			return Chunk{}, cmp.Or(err, openErr)
		}
		return readRows(ctx, tx, chunk, opt)
	})
	if err != nil {
		return Chunk{}, err
	}
	chunk.Position = exp.Position
	return chunk, nil
}

// sameStorage is ErrNotInSnapshot unless table id has in the transaction's
// snapshot the storage it has now (sameStorageSQL).
func sameStorage(ctx context.Context, tx *readTx, id change.TableID) error {
	var same *bool
	if err := tx.QueryRow(ctx, sameStorageSQL, quoteTable(id)).Scan(&same); err != nil {
		return err
	}
	if same == nil || !*same {
		return fmt.Errorf("%s was created, rewritten or truncated after the snapshot: %w", id, source.ErrNotInSnapshot)
	}
	return nil
}

// sameStorageSQL says whether a table ($1, a quoted name) and each of its
// partitions has in the transaction's snapshot the storage (relfilenode)
// it has now: pg_class read by a query follows the snapshot,
// pg_relation_filenode and pg_partition_tree (empty for a table that is
// not partitioned) the catalog as it is now. A table the snapshot does
// not know (created since) has no pg_class row there; a partitioned one
// has no storage of its own.
const sameStorageSQL = `SELECT bool_and(c.oid IS NOT NULL AND (c.relkind = 'p' OR c.relfilenode = pg_relation_filenode(t.relid)))
	FROM (SELECT $1::regclass AS relid UNION SELECT relid FROM pg_partition_tree($1::regclass)) t
	LEFT JOIN pg_class c ON c.oid = t.relid`
