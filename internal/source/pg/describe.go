package pg

import (
	"context"
	"fmt"
	"slices"

	"github.com/tidemark/tidemark/internal/change"
)

// Describe reads a table's columns and row key. The key is keyCols when
// given (from the config), else the key of the index the log identifies
// rows by (see readIndexKeys); a table with none fails with ErrNoKey and
// what to do.
func Describe(ctx context.Context, q queryer, id change.TableID, keyCols []string) (*change.Table, error) {
	tables, errs, err := DescribeMany(ctx, q, []change.TableID{id}, map[change.TableID][]string{id: keyCols})
	if err != nil {
		return nil, err
	}
	return tables[0], errs[0]
}

// DescribeMany describes tables as Describe describes each, in three
// catalog queries for all of them rather than three for each: a stream's
// start describes every table it streams, and planning those queries was
// most of the source's work there. errs[i] is why table i has no
// description (ErrNoTable, ErrNoKey, …); err, a failure of them all.
func DescribeMany(ctx context.Context, q queryer, ids []change.TableID, keys map[change.TableID][]string) (tables []*change.Table, errs []error, err error) {
	what := describing(ids)
	tables, err = readColumns(ctx, q, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("describe %s: %w", what, err)
	}
	keyCols := make([][]string, len(ids))
	var keyless []int // tables keyed by their index
	for i, id := range ids {
		keyCols[i] = keys[id]
		if tables[i] != nil && len(keyCols[i]) == 0 {
			keyless = append(keyless, i)
		}
	}
	if err := readIndexKeys(ctx, q, ids, keyless, keyCols); err != nil {
		return nil, nil, fmt.Errorf("read key of %s: %w", what, err)
	}
	idents, err := readIdentities(ctx, q, ids, tables)
	if err != nil {
		return nil, nil, fmt.Errorf("read replica identity of %s: %w", what, err)
	}
	errs = make([]error, len(ids))
	for i, id := range ids {
		if tables[i] == nil {
			errs[i] = fmt.Errorf("describe %s: %w", id, ErrNoTable)
			continue
		}
		if errs[i] = keyTable(tables[i], keyCols[i], idents[i]); errs[i] != nil {
			tables[i] = nil
		}
	}
	return tables, errs, nil
}

// describing names the tables in an error of all of them.
func describing(ids []change.TableID) string {
	if len(ids) == 1 {
		return ids[0].String()
	}
	return fmt.Sprintf("%d tables", len(ids))
}

// wanted are the tables ids as two arrays, schemas and names, that the
// catalog queries unnest WITH ORDINALITY: a row's ordinal, from 1, is its
// table's place in ids. As names they compare as a name parameter did (a
// name longer than 63 bytes is cut to 63).
const wanted = `unnest($1::pg_catalog.name[], $2::pg_catalog.name[]) WITH ORDINALITY AS w(nsp, rel, i)
		JOIN pg_namespace n ON n.nspname = w.nsp
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = w.rel`

func wantedArgs(ids []change.TableID) (schemas, names []string) {
	schemas, names = make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		schemas[i], names[i] = id.Schema, id.Name
	}
	return schemas, names
}

// place is where the row of ordinal i (from 1, wanted's w.i) belongs
// among n tables asked about.
func place(i, n int) (int, error) {
	if i < 1 || i > n {
		return 0, fmt.Errorf("the catalog answered for table %d of %d", i, n)
	}
	return i - 1, nil
}

// subset is ids[i] for each i of which, in that order.
func subset(ids []change.TableID, which []int) []change.TableID {
	out := make([]change.TableID, len(which))
	for j, i := range which {
		out[j] = ids[i]
	}
	return out
}

// readColumns reads each table's columns; a table the source does not have
// is nil.
func readColumns(ctx context.Context, q queryer, ids []change.TableID) ([]*change.Table, error) {
	schemas, names := wantedArgs(ids)
	rows, err := q.Query(ctx, `
		SELECT w.i, a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid,
		       CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END,
		       `+collationColumns+`
		       a.attnotnull, a.atttypmod, a.attnum, `+generatedColumn+`
		FROM `+wanted+`
		JOIN pg_attribute a ON a.attrelid = c.oid
		JOIN pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
		WHERE a.attnum > 0 AND NOT a.attisdropped
		ORDER BY w.i, a.attnum`, schemas, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tables := make([]*change.Table, len(ids))
	for rows.Next() {
		var i int
		var c change.Column
		if err := rows.Scan(&i, &c.Name, &c.Type, &c.TypeOID, &c.BaseOID, &c.Collation, &c.ByteOrder, &c.NotNull, &c.TypeMod, &c.Num, &c.Generated); err != nil {
			return nil, err
		}
		at, err := place(i, len(ids))
		if err != nil {
			return nil, err
		}
		c.Tag = change.PostgresTag(c.BaseOID)
		if tables[at] == nil {
			tables[at] = &change.Table{ID: ids[at]}
		}
		tables[at].Columns = append(tables[at].Columns, c)
	}
	return tables, rows.Err()
}

// readIndexKeys sets keyCols[i], for each table i of which, to the key
// columns, in index order, of the index the log identifies its rows by:
// the replica identity index (REPLICA IDENTITY USING INDEX, even when a
// primary key exists besides it), else the primary key; under REPLICA
// IDENTITY FULL, where the log carries whole rows, a table without a
// primary key is keyed by a unique index that could be a replica identity
// (on NOT NULL columns, not partial, no expressions, not deferrable), the
// one with the fewest columns. INCLUDE columns are not part of the key:
// the log leaves them out of the old row. A table with none keeps none.
func readIndexKeys(ctx context.Context, q queryer, ids []change.TableID, which []int, keyCols [][]string) error {
	if len(which) == 0 {
		return nil
	}
	schemas, names := wantedArgs(subset(ids, which))
	rows, err := q.Query(ctx, `
		SELECT w.i, a.attname
		FROM `+wanted+`
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
		WHERE k.pos <= i.indnkeyatts
		ORDER BY w.i, k.pos`, schemas, names)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var j int
		var col string
		if err := rows.Scan(&j, &col); err != nil {
			return err
		}
		at, err := place(j, len(which))
		if err != nil {
			return err
		}
		keyCols[which[at]] = append(keyCols[which[at]], col)
	}
	return rows.Err()
}

// identity is the replica identity of a table whose rows change: the
// table's own, or one leaf partition's of a partitioned table.
type identity struct {
	id          change.TableID
	isPartition bool
	kind        string
	cols        []string
}

// readIdentities reads, for each described table, the replica identities
// the log carries its rows by, in name order.
func readIdentities(ctx context.Context, q queryer, ids []change.TableID, tables []*change.Table) ([][]identity, error) {
	idents := make([][]identity, len(ids))
	var which []int
	for i, t := range tables {
		if t != nil {
			which = append(which, i)
		}
	}
	if len(which) == 0 {
		return idents, nil
	}
	schemas, names := wantedArgs(subset(ids, which))
	rows, err := q.Query(ctx, `
		WITH root AS (
		  SELECT w.i, c.oid, c.relkind FROM `+wanted+`),
		changing AS (
		  SELECT i, oid FROM root WHERE relkind <> 'p'
		  UNION ALL
		  SELECT root.i, p.relid FROM root, pg_partition_tree(root.oid) p WHERE root.relkind = 'p' AND p.isleaf)
		SELECT ch.i, n.nspname::text, c.relname::text, c.relispartition, c.relreplident::text, COALESCE((
		  SELECT array_agg(a.attname::text)
		  FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid
		    AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1]) -- key columns, not INCLUDE ones
		  WHERE i.indrelid = c.oid AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))
		), '{}')
		FROM changing ch JOIN pg_class c ON c.oid = ch.oid JOIN pg_namespace n ON n.oid = c.relnamespace
		ORDER BY 1, 2, 3`, schemas, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var j int
		var id identity
		if err := rows.Scan(&j, &id.id.Schema, &id.id.Name, &id.isPartition, &id.kind, &id.cols); err != nil {
			return nil, err
		}
		at, err := place(j, len(which))
		if err != nil {
			return nil, err
		}
		idents[which[at]] = append(idents[which[at]], id)
	}
	return idents, rows.Err()
}

// keyTable sets t's key to keyCols, and checks that the log identifies
// rows by it (checkIdentity).
func keyTable(t *change.Table, keyCols []string, idents []identity) error {
	id := t.ID
	if len(keyCols) == 0 {
		return fmt.Errorf("table %s: %w: add a primary key, or set REPLICA IDENTITY USING INDEX on a unique index of NOT NULL columns, or set REPLICA IDENTITY FULL and either create such a unique index or name the key columns under keys: in the stream's config", id, ErrNoKey)
	}
	for _, name := range keyCols {
		i := t.ColumnIndex(name)
		if i < 0 {
			return fmt.Errorf("table %s: key column %q does not exist (columns: %s)", id, name, columnNames(t))
		}
		if t.Columns[i].Generated != "" {
			return fmt.Errorf("table %s: %w: key column %q is a generated column, which the log leaves out of every change: make a unique index of ordinary columns the replica identity (ALTER TABLE %s REPLICA IDENTITY USING INDEX …) or name such key columns under keys: in the stream's config", id, ErrGeneratedKey, name, quoteTable(id))
		}
		t.Key = append(t.Key, i)
	}
	return checkIdentity(t, idents)
}

// checkIdentity makes sure the log identifies rows by the key: updates and
// deletes carry the replica identity's columns only, so a key outside them
// would turn every delete into a no-op in the destination. The identity
// that counts is that of the table whose rows change: for a partitioned
// table, each of its leaf partitions (the log carries their old rows,
// published as the root's).
func checkIdentity(t *change.Table, idents []identity) error {
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
