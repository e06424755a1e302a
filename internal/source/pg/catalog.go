package pg

import (
	"context"
	"fmt"
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
