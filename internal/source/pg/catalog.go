package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
)

// ErrNoKey means a table has no usable row key.
var ErrNoKey = errors.New("no usable row key")

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
// given (from the config), else the primary key, else the replica identity
// index; a table with none of them fails with ErrNoKey and what to do.
func Describe(ctx context.Context, q queryer, id change.TableID, keyCols []string) (*change.Table, error) {
	rows, err := q.Query(ctx, `
		SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid,
		       CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
		       -- the database's default collation, by the name the catalog gives it
		       CASE WHEN co.collname = 'default' THEN COALESCE((
		         SELECT c2.collname FROM pg_collation c2, pg_database d
		         WHERE d.datname = current_database() AND d.datlocprovider = 'c' AND c2.collprovider = 'c'
		           AND c2.collcollate = d.datcollate AND c2.collencoding IN (-1, d.encoding)
		         ORDER BY c2.collencoding DESC LIMIT 1), 'default')
		       ELSE COALESCE(co.collname, '') END,
		       COALESCE(co.collname IN ('C', 'POSIX', 'ucs_basic') OR (co.collname = 'default' AND
		         (SELECT d.datlocprovider = 'c' AND d.datcollate IN ('C', 'POSIX', 'C.UTF-8', 'C.utf8')
		          FROM pg_database d WHERE d.datname = current_database())), false),
		       a.attnotnull
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
		if err := rows.Scan(&c.Name, &c.Type, &c.TypeOID, &c.BaseOID, &c.Collation, &c.ByteOrder, &c.NotNull); err != nil {
			rows.Close()
			return nil, fmt.Errorf("describe %s: %w", id, err)
		}
		t.Columns = append(t.Columns, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	if len(t.Columns) == 0 {
		return nil, fmt.Errorf("describe %s: table not found (or has no columns)", id)
	}
	if len(keyCols) == 0 {
		if keyCols, err = indexKey(ctx, q, id); err != nil {
			return nil, err
		}
	}
	if len(keyCols) == 0 {
		return nil, fmt.Errorf("table %s: %w: add a primary key, set REPLICA IDENTITY USING INDEX on a unique index, or name the key columns under keys: in the stream's config", id, ErrNoKey)
	}
	for _, name := range keyCols {
		i := t.ColumnIndex(name)
		if i < 0 {
			return nil, fmt.Errorf("table %s: key column %q does not exist (columns: %s)", id, name, columnNames(t))
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
// would turn every delete into a no-op in the destination.
func checkIdentity(ctx context.Context, q queryer, t *change.Table) error {
	var ident string
	var cols []string
	err := q.QueryRow(ctx, `
		SELECT c.relreplident::text, COALESCE((
		  SELECT array_agg(a.attname::text)
		  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
		  WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))
		), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, t.ID.Schema, t.ID.Name).Scan(&ident, &cols)
	if err != nil {
		return fmt.Errorf("read replica identity of %s: %w", t.ID, err)
	}
	if ident == "f" {
		return nil
	}
	covered := map[string]bool{}
	for _, c := range cols {
		covered[c] = true
	}
	for _, k := range t.KeyColumns() {
		if !covered[k.Name] {
			return fmt.Errorf("table %s: %w: key column %q is not part of the table's replica identity, so updates and deletes would not say which row they touch: run ALTER TABLE %s REPLICA IDENTITY FULL (or USING INDEX on a unique index of the key)", t.ID, ErrNoKey, k.Name, quoteTable(t.ID))
		}
	}
	return nil
}

// indexKey returns the primary key's columns, else the replica identity
// index's, in index order.
func indexKey(ctx context.Context, q queryer, id change.TableID) ([]string, error) {
	rows, err := q.Query(ctx, `
		SELECT a.attname
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, pos)
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
		WHERE n.nspname = $1 AND c.relname = $2
		  AND i.indexrelid = (
		    SELECT i2.indexrelid FROM pg_index i2
		    WHERE i2.indrelid = c.oid AND (i2.indisprimary OR i2.indisreplident)
		    ORDER BY i2.indisprimary DESC LIMIT 1)
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
