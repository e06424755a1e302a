package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// ExactCountBytes is the size up to which a table's rows are counted rather
// than taken from the planner's statistics: counting reads the whole table.
const ExactCountBytes = 64 << 20

// TableSize is what the source says of a table before a backfill reads it.
type TableSize = source.TableSize

// EstimateTable sizes a table, or a partitioned table with all its
// partitions, as a backfill of it would read it.
func EstimateTable(ctx context.Context, q queryer, id change.TableID) (TableSize, error) {
	name := quoteTable(id)
	var size TableSize
	var exists bool
	var unanalyzed bool
	var rows float64
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
		return TableSize{}, fmt.Errorf("size %s: %w", id, err)
	}
	if !exists {
		return TableSize{}, fmt.Errorf("size %s: %w", id, ErrNoTable)
	}
	// A plain table is its own leaf; a partitioned one is the sum of its
	// leaf partitions (pg_partition_tree lists nothing for a plain table).
	err := q.QueryRow(ctx, `SELECT coalesce(sum(greatest(c.reltuples, 0)), 0), coalesce(bool_or(c.reltuples < 0), false),
			coalesce(sum(pg_table_size(c.oid)), 0)::bigint
		FROM pg_class c
		WHERE (c.oid = to_regclass($1) AND c.relkind <> 'p')
		   OR c.oid IN (SELECT relid FROM pg_partition_tree(to_regclass($1)) WHERE isleaf)`, name).Scan(&rows, &unanalyzed, &size.Bytes)
	if err != nil {
		return TableSize{}, fmt.Errorf("size %s: %w", id, err)
	}
	switch {
	case size.Bytes <= ExactCountBytes:
		if err := q.QueryRow(ctx, `SELECT count(*) FROM `+name).Scan(&size.Rows); err != nil {
			return TableSize{}, fmt.Errorf("count rows of %s: %w", id, err)
		}
		size.Exact = true
	case unanalyzed:
		size.Rows = -1
	default:
		size.Rows = int64(rows)
	}
	return size, nil
}

// ErrNoTable is a table the source does not have.
var ErrNoTable = source.ErrNoTable

// CatalogConn is one short-lived connection for catalog reads outside a
// running stream, with the pool's session settings and read transactions.
type CatalogConn struct {
	conn     *pgx.Conn
	timeouts ReadTimeouts
}

// ConnectForCatalog opens a CatalogConn.
func ConnectForCatalog(ctx context.Context, dsn string, timeouts ReadTimeouts) (*CatalogConn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("source DSN: %s", redactErr(err))
	}
	withSessionParams(cfg.RuntimeParams)
	cfg.RuntimeParams["application_name"] = "tidemark_estimate"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the source: %w", err)
	}
	return &CatalogConn{conn: conn, timeouts: timeouts}, nil
}

// EstimateTable sizes a table in a read transaction of its own.
func (c *CatalogConn) EstimateTable(ctx context.Context, id change.TableID) (TableSize, error) {
	tx, err := beginRead(ctx, c.conn, readCommitted, c.timeouts)
	if err != nil {
		return TableSize{}, err
	}
	defer tx.rollback(ctx)
	return EstimateTable(ctx, tx, id)
}

// Describe reads one table's shape in a read transaction of its own.
func (c *CatalogConn) Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error) {
	tx, err := beginRead(ctx, c.conn, readCommitted, c.timeouts)
	if err != nil {
		return nil, err
	}
	defer tx.rollback(ctx)
	t, err := Describe(ctx, tx, id, keyCols)
	return t, classify(err)
}

// Close closes the connection.
func (c *CatalogConn) Close(ctx context.Context) error { return c.conn.Close(ctx) }
