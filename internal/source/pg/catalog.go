package pg

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
)

// ErrNoKey means a table has no usable row key.
var ErrNoKey = source.ErrNoKey

// ErrGeneratedKey means a table's key has a stored generated column.
var ErrGeneratedKey = source.ErrGeneratedKey

// queryer is what catalog reads need from a connection or pool.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ListTables returns the source's ordinary and partitioned root tables
// outside the system schemas.
func ListTables(ctx context.Context, q queryer) ([]change.TableID, error) {
	rows, err := q.Query(ctx, `
		SELECT n.nspname, c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
		ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("list source tables: %w", err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (change.TableID, error) {
		var id change.TableID
		err := r.Scan(&id.Schema, &id.Name)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("list source tables: %w", err)
	}
	return ids, nil
}

// Describe reads a table's columns and row key. The key is keyCols when
// given (from the config), else the key of the index the log identifies
// rows by (see indexKey); a table with none fails with ErrNoKey and what to
// do.
func Describe(ctx context.Context, q queryer, id change.TableID, keyCols []string) (*change.Table, error) {
	rows, err := q.Query(ctx, `
		SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid,
		       CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
		       `+collationColumns+`
		       a.attnotnull, a.atttypmod, a.attnum, `+generatedColumn+`
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, id.Schema, id.Name)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	t := &change.Table{ID: id}
	for rows.Next() {
		var c change.Column
		if err := rows.Scan(&c.Name, &c.Type, &c.TypeOID, &c.BaseOID, &c.Collation, &c.ByteOrder, &c.NotNull, &c.TypeMod, &c.Num, &c.Generated); err != nil {
			rows.Close()
			return nil, fmt.Errorf("describe %s: %w", id, err)
		}
		c.Tag = change.PostgresTag(c.BaseOID)
		t.Columns = append(t.Columns, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	if len(t.Columns) == 0 {
		return nil, fmt.Errorf("describe %s: %w", id, ErrNoTable)
	}
	if len(keyCols) == 0 {
		if keyCols, err = indexKey(ctx, q, id); err != nil {
			return nil, err
		}
	}
	if len(keyCols) == 0 {
		return nil, fmt.Errorf("table %s: %w: add a primary key, or set REPLICA IDENTITY USING INDEX on a unique index of NOT NULL columns, or set REPLICA IDENTITY FULL and either create such a unique index or name the key columns under keys: in the stream's config", id, ErrNoKey)
	}
	for _, name := range keyCols {
		i := t.ColumnIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("table %s: key column %q does not exist (columns: %s)", id, name, columnNames(t))
		}
		if t.Columns[i].Generated != "" {
			return nil, fmt.Errorf("table %s: %w: key column %q is a generated column, which the log leaves out of every change: make a unique index of ordinary columns the replica identity (ALTER TABLE %s REPLICA IDENTITY USING INDEX …) or name such key columns under keys: in the stream's config", id, ErrGeneratedKey, name, quoteTable(id))
		}
		t.Key = append(t.Key, i)
	}
	if err := checkIdentity(ctx, q, t); err != nil {
		return nil, err
	}
	return t, nil
}

// checkIdentity makes sure the log identifies rows by the key: updates and
// deletes carry the replica identity's columns only, so a key outside them
// would turn every delete into a no-op in the destination. The identity
// that counts is that of the table whose rows change: for a partitioned
// table, each of its leaf partitions (the log carries their old rows,
// published as the root's).
func checkIdentity(ctx context.Context, q queryer, t *change.Table) error {
	rows, err := q.Query(ctx, `
		WITH root AS (
		  SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE n.nspname = $1 AND c.relname = $2)
		SELECT n.nspname::text, c.relname::text, c.relispartition, c.relreplident::text, COALESCE((
		  SELECT array_agg(a.attname::text)
		  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid
		    AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1]) -- key columns, not INCLUDE ones
		  WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))
		), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid IN (SELECT oid FROM root WHERE relkind <> 'p'
		                UNION ALL
		                SELECT p.relid FROM root, pg_partition_tree(root.oid) p WHERE root.relkind = 'p' AND p.isleaf)
		ORDER BY 1, 2`, t.ID.Schema, t.ID.Name)
	if err != nil {
		return fmt.Errorf("read replica identity of %s: %w", t.ID, err)
	}
	type identity struct {
		id          change.TableID
		isPartition bool
		kind        string
		cols        []string
	}
	idents, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (identity, error) {
		var i identity
		err := r.Scan(&i.id.Schema, &i.id.Name, &i.isPartition, &i.kind, &i.cols)
		return i, err
	})
	if err != nil {
		return fmt.Errorf("read replica identity of %s: %w", t.ID, err)
	}
	for _, ident := range idents {
		if ident.kind == "f" {
			continue
		}
		for _, k := range t.KeyColumns() {
			if slices.Contains(ident.cols, k.Name) {
				continue
			}
			if ident.isPartition && ident.id != t.ID {
				return fmt.Errorf("table %s: %w: key column %q is not part of the replica identity of its partition %s, so updates and deletes there would not say which row they touch: run ALTER TABLE %s REPLICA IDENTITY FULL (or USING INDEX on a unique index of the key)", t.ID, ErrNoKey, k.Name, ident.id, quoteTable(ident.id))
			}
			return fmt.Errorf("table %s: %w: key column %q is not part of the table's replica identity, so updates and deletes would not say which row they touch: run ALTER TABLE %s REPLICA IDENTITY FULL (or USING INDEX on a unique index of the key)", t.ID, ErrNoKey, k.Name, quoteTable(t.ID))
		}
	}
	return nil
}

// indexKey returns the key columns, in index order, of the index the log
// identifies rows by: the replica identity index (REPLICA IDENTITY USING
// INDEX, even when a primary key exists besides it), else the primary key;
// under REPLICA IDENTITY FULL, where the log carries whole rows, a table
// without a primary key is keyed by a unique index that could be a replica
// identity (on NOT NULL columns, not partial, no expressions, not
// deferrable), the one with the fewest columns. INCLUDE columns are not part
// of the key: the log leaves them out of the old row.
func indexKey(ctx context.Context, q queryer, id change.TableID) ([]string, error) {
	rows, err := q.Query(ctx, `
		SELECT a.attname
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN LATERAL (
		  SELECT i.indkey, i.indnkeyatts
		  FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
		  WHERE i.indrelid = c.oid AND (i.indisprimary
		    OR (c.relreplident = 'i' AND i.indisreplident)
		    OR (c.relreplident = 'f' AND i.indisunique AND i.indimmediate AND i.indisvalid
		        AND i.indpred IS NULL AND i.indexprs IS NULL
		        AND NOT EXISTS (SELECT 1 FROM pg_attribute na
		                        WHERE na.attrelid = c.oid AND na.attnum = ANY (i.indkey) AND NOT na.attnotnull)))
		  ORDER BY (c.relreplident = 'i' AND i.indisreplident) DESC, i.indisprimary DESC, i.indnkeyatts, ic.relname
		  LIMIT 1) i
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, pos)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		WHERE n.nspname = $1 AND c.relname = $2 AND k.pos <= i.indnkeyatts
		ORDER BY k.pos`, id.Schema, id.Name)
	if err != nil {
		return nil, fmt.Errorf("read key of %s: %w", id, err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read key of %s: %w", id, err)
	}
	return cols, nil
}

func columnNames(t *change.Table) string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// quoteTable renders a table name for SQL.
func quoteTable(id change.TableID) string {
	return pgx.Identifier{id.Schema, id.Name}.Sanitize()
}

func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// generatedColumn is a select-list column of a column (a.*): the
// expression of a stored generated column as the catalog prints it, with
// the table's column names as they are now; "" for any other column.
const generatedColumn = `COALESCE((SELECT pg_get_expr(ad.adbin, ad.adrelid) FROM pg_attrdef ad
	  WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum AND a.attgenerated = 's'), '')`

// collationColumns are two select-list columns of a column (a.*, its
// collation co): the collation's name (the database's default one by the
// name the catalog gives it) and whether it sorts by bytes. Describe and
// the shape reads share them.
const collationColumns = `CASE WHEN co.collname = 'default' THEN ` + defaultCollationName + `
	ELSE COALESCE(co.collname, '') END,
	COALESCE(co.collname IN ('C', 'POSIX', 'ucs_basic') OR (co.collname = 'default' AND ` + defaultCollationBytewise + `), false),`

// collationColumnsGiven are collationColumns with the database's default
// collation given, as $2 (its name) and $3 (whether it sorts by bytes):
// finding it scans pg_collation, which a chunk read should not pay each
// time (Source.defaultCollation reads it once a minute).
const collationColumnsGiven = `CASE WHEN co.collname = 'default' THEN $2::pg_catalog.text
	ELSE COALESCE(co.collname, '') END,
	COALESCE(co.collname IN ('C', 'POSIX', 'ucs_basic') OR (co.collname = 'default' AND $3::pg_catalog.bool), false),`

// defaultCollationName is the database's default collation by the name
// the catalog gives it ('default' when none is its twin), and
// defaultCollationBytewise whether it sorts by bytes. The database's
// locale is set when it is created; the twin's name changes only with a
// collation created or dropped.
const (
	defaultCollationName = `COALESCE((
	  SELECT c2.collname FROM pg_collation c2, pg_database d
	  WHERE d.datname = current_database() AND d.datlocprovider = 'c' AND c2.collprovider = 'c'
	    AND c2.collcollate = d.datcollate AND c2.collencoding IN (-1, d.encoding)
	  ORDER BY c2.collencoding DESC LIMIT 1), 'default')`
	defaultCollationBytewise = `COALESCE((SELECT d.datlocprovider = 'c' AND d.datcollate IN ('C', 'POSIX', 'C.UTF-8', 'C.utf8')
	   FROM pg_database d WHERE d.datname = current_database()), false)`
)
