package pg

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

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
	if _, err := conn.Exec(ctx, keepIdleSQL(conn)).ReadAll(); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, classify(fmt.Errorf("prepare the connection that exports the snapshot: %w", err))
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
		return nil, fmt.Errorf("replication slot %s created, but its snapshot cannot be used: %w", s.cfg.Slot, err)
	}
	s.log.Info("created replication slot with an exported snapshot", logkey.Slot(s.cfg.Slot), "snapshot", res.SnapshotName, "lsn", res.ConsistentPoint)
	return source.NewExport(res.SnapshotName, pos, func() {
		ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
		defer cancel()
		conn.Close(ctx)
	}), nil
}

// keepIdleSQL turns off, for the exporting connection, the timeouts that
// would end it while it sits idle in the transaction holding the snapshot
// (a role's or the server's idle_in_transaction_session_timeout, and from
// PostgreSQL 17 transaction_timeout). It runs before the slot is created:
// any command after that ends the snapshot.
func keepIdleSQL(conn *pgconn.PgConn) string {
	sql := "SET idle_in_transaction_session_timeout = 0"
	if majorVersion(conn.ParameterStatus("server_version")) >= 17 {
		sql += "; SET transaction_timeout = 0"
	}
	return sql
}

// majorVersion is the major version in a server_version the server
// reports at startup ("17.2", "18devel", "16.4 (Debian 16.4-1)"); 0 when
// it has none. (server_version_num is not reported.)
func majorVersion(v string) int {
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// snapshotName is the form of an exported snapshot's name (hexadecimal
// virtual transaction id and a sequence number): SET TRANSACTION SNAPSHOT
// takes no parameter, so the name is checked before it is written into
// the statement.
var snapshotName = regexp.MustCompile(`^[0-9A-F]{1,8}-[0-9A-F]{1,16}(-[0-9]{1,10})?$`)

// ReadChunkIn reads a chunk as ReadChunk does, in exp's snapshot, its
// position exp's. The table must be the one the snapshot shows: a table
// whose storage was rewritten since (TRUNCATE, a rewriting ALTER TABLE),
// that did not exist then or was attached as a partition since, shows an
// old snapshot no rows or the wrong ones, and one whose columns were
// dropped or renamed since cannot be read there: each is ErrNotInSnapshot,
// as is a snapshot that is gone.
func (s *Source) ReadChunkIn(ctx context.Context, exp *source.Export, t *change.Table, opt ReadOptions) (Chunk, error) {
	if !snapshotName.MatchString(exp.Name) {
		return Chunk{}, fmt.Errorf("read chunk of %s: the snapshot's name %q is not as PostgreSQL writes one: %w", t.ID, exp.Name, source.ErrNotInSnapshot)
	}
	dc, err := s.defaultCollation(ctx)
	if err != nil {
		return Chunk{}, err
	}
	var chunk Chunk
	err = s.readAt(ctx, repeatableRead, func(tx *readTx) (err error) {
		chunk, err = readIn(ctx, tx, exp.Name, t, dc, opt)
		return err
	})
	if err != nil {
		err = fmt.Errorf("read chunk of %s in the exported snapshot: %w", t.ID, err)
		if errors.Is(err, source.ErrNotInSnapshot) {
			return Chunk{}, err // read outside it, not a failure
		}
		return Chunk{}, classifyRead(ctx, err, s.cfg.Timeouts.OrDefault().Statement)
	}
	chunk.Position = exp.Position
	return chunk, nil
}

// readIn reads a chunk in tx, which imports the snapshot named name.
func readIn(ctx context.Context, tx *readTx, name string, t *change.Table, dc defaultCollation, opt ReadOptions) (Chunk, error) {
	if _, err := tx.pgConn().Exec(ctx, "SET TRANSACTION SNAPSHOT '"+name+"'").ReadAll(); err != nil {
		if code := sqlState(err); code == codeInvalidParameter || code == codeObjectState {
			// The exporting connection is gone, and the snapshot with it
			// ("invalid snapshot identifier"; "could not import" while
			// it ends).
			return Chunk{}, fmt.Errorf("%w: %w", source.ErrNotInSnapshot, err)
		}
		return Chunk{}, err
	}
	// The check follows openChunk's lock: no rewrite can come between it
	// and the read. A table the snapshot does not know fails openChunk (no
	// columns, a Go error): the check then says why. After an SQL error
	// the transaction is aborted, and that error stands.
	chunk, err := openChunk(ctx, tx, t, dc)
	if err != nil {
		if tx.pgConn().TxStatus() == 'T' && !tx.pgConn().IsClosed() {
			if serr := sameStorage(ctx, tx, t.ID); errors.Is(serr, source.ErrNotInSnapshot) {
				return Chunk{}, serr
			}
		}
		return Chunk{}, drifted(err)
	}
	if err := sameStorage(ctx, tx, t.ID); err != nil {
		return Chunk{}, err
	}
	chunk, err = readRows(ctx, tx, chunk, opt)
	return chunk, drifted(err)
}

// drifted makes an error of a read in the snapshot that the catalog's
// changes since explain ErrNotInSnapshot: the snapshot's columns (and the
// query built from them) name a column dropped or renamed since, which
// the catalog as it is now refuses (class 42, syntax error or access rule
// violation). Such a table is read outside the snapshot, where the error
// stands if it was not the drift.
func drifted(err error) error {
	if code := sqlState(err); len(code) == 5 && code[:2] == "42" {
		return fmt.Errorf("the table's columns changed since the snapshot: %w: %w", source.ErrNotInSnapshot, err)
	}
	return err
}

// sqlState is err's SQLSTATE, "" when it has none.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// sameStorage is ErrNotInSnapshot unless table id has in the transaction's
// snapshot the storage it has now (sameStorageSQL).
func sameStorage(ctx context.Context, tx *readTx, id change.TableID) error {
	var same *bool
	if err := tx.QueryRow(ctx, sameStorageSQL, quoteTable(id)).Scan(&same); err != nil {
		return err
	}
	if same == nil || !*same {
		return fmt.Errorf("%s was created, rewritten, truncated or attached as a partition after the snapshot (or has a partition with no storage): %w", id, source.ErrNotInSnapshot)
	}
	return nil
}

// sameStorageSQL says whether a table ($1, a quoted name) and each of its
// partitions has in the transaction's snapshot the storage (relfilenode)
// it has now, and each partition its parent: pg_class and pg_inherits
// read by a query follow the snapshot, pg_relation_filenode and
// pg_partition_tree (empty for a table that is not partitioned) the
// catalog as it is now. A table the snapshot does not know (created
// since) has no pg_class row there; a partition attached since has no
// pg_inherits row there, and the changes it had before it was attached
// are in neither the snapshot nor the log. A partitioned table has no
// storage of its own; another relation without storage (a foreign
// partition) has none to compare, and is refused.
const sameStorageSQL = `SELECT bool_and(c.oid IS NOT NULL
		AND (c.relkind = 'p' OR c.relfilenode IS NOT DISTINCT FROM pg_relation_filenode(t.relid))
		AND (t.parentrelid IS NULL OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = t.relid AND i.inhparent = t.parentrelid)))
	FROM (SELECT $1::regclass AS relid, NULL::regclass AS parentrelid
		UNION SELECT relid, parentrelid FROM pg_partition_tree($1::regclass) WHERE level > 0) t
	LEFT JOIN pg_class c ON c.oid = t.relid`
