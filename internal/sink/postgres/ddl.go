package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/collate"
	"github.com/tidemark/tidemark/internal/genexpr"
	"github.com/tidemark/tidemark/internal/sink"
)

// firstNormalOID is PostgreSQL's FirstNormalObjectId: types below it are
// built in and have the same oid on every server.
const firstNormalOID = 16384

// EnsureTable creates schema and table unless the table exists. Columns get
// the source's types as the destination knows them; see resolveType.
func (s *Sink) EnsureTable(ctx context.Context, t *change.Table) error {
	s.justCreated = nil
	if t.ID.Schema == "_tidemark" {
		// Its rows would land in (or next to) the checkpoint tables.
		return fmt.Errorf("table %s: schema _tidemark is tidemark's own in the destination: %w; exclude the table from the stream", t.ID, sink.ErrTableName)
	}
	if err := s.ensureTable(ctx, t); err != nil {
		return fmt.Errorf("ensure table %s: %w", t.ID, err)
	}
	return nil
}

func (s *Sink) ensureTable(ctx context.Context, t *change.Table) error {
	if err := s.ensureConn(ctx); err != nil {
		return err
	}
	ts, err := s.table(t)
	if err != nil {
		return err
	}
	if kind, err := s.relationKind(ctx, ts.name); err != nil {
		return err
	} else if kind != "" {
		if what := notATable(kind); what != "" {
			// A COPY into it fails midway, or a view writes through to
			// another table: say so before anything is written.
			return fmt.Errorf("%s in the destination is %s, not a table: %w; drop or rename it there, or exclude the table from the stream", t.ID, what, sink.ErrTableName)
		}
		// The table may lack its sort key index: made by hand, or by an
		// EnsureTable that failed between the table and the index.
		return s.ensureSortKeyIndex(ctx, t, ts)
	}
	if err := s.ensureSortKeys(ctx, t); err != nil {
		return err
	}
	created, err := s.createTable(ctx, t, ts)
	if s.forgetGone(err) {
		created, err = s.createTable(ctx, t, ts) // with the schema and types looked up again
	}
	if err != nil {
		return err
	}
	if err := s.createSortKeyIndex(ctx, ts); err != nil {
		return err
	}
	if created {
		s.justCreated = t
	}
	return nil
}

// relationKind is the pg_class relkind of the relation qualified (a
// quoted, qualified name) names, "" when there is none.
func (s *Sink) relationKind(ctx context.Context, qualified string) (string, error) {
	var kind string
	err := s.conn.QueryRow(ctx, "SELECT coalesce((SELECT relkind::text FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass($1)), '')", qualified).Scan(&kind)
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", qualified, err)
	}
	return kind, nil
}

// notATable says what a relation of kind is when it is not a table (a
// plain or partitioned one), "" when it is one.
func notATable(kind string) string {
	switch kind {
	case "r", "p":
		return ""
	case "v":
		return "a view"
	case "m":
		return "a materialized view"
	case "c":
		return "a composite type"
	case "f":
		return "a foreign table"
	case "S":
		return "a sequence"
	case "i", "I":
		return "an index"
	}
	return "a relation of kind " + strconv.Quote(kind)
}

// isTable reports whether qualified names a table (not a composite type,
// a view or an index of that name).
func (s *Sink) isTable(ctx context.Context, qualified string) (bool, error) {
	kind, err := s.relationKind(ctx, qualified)
	return kind != "" && notATable(kind) == "", err
}

// catalogNameIndexes are the system catalogs' unique indexes on an
// object's name in its schema.
var catalogNameIndexes = map[string]bool{
	"pg_class_relname_nsp_index":     true, // tables, indexes
	"pg_type_typname_nsp_index":      true, // a table's row type
	"pg_namespace_nspname_index":     true, // schemas
	"pg_proc_proname_args_nsp_index": true, // functions
}

// madeMeanwhile reports whether err says another session created, since
// it was looked for, the object a CREATE names: the error code dup
// (duplicate_table, say), or a unique violation of a catalog's name index,
// which is what PostgreSQL reports instead when the other session's CREATE
// had not yet committed as this one began (it waits for that commit).
func madeMeanwhile(err error, dup string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return (dup != "" && pgErr.Code == dup) || (pgErr.Code == "23505" && catalogNameIndexes[pgErr.ConstraintName])
}

// typeTaken reports whether err is CREATE TABLE's duplicate_object: a
// type (not a table's own) already has the table's name.
func typeTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42710"
}

// createTable creates t's table in its schema, which it makes if missing.
// It reports false when another session created the table since it was
// looked for.
func (s *Sink) createTable(ctx context.Context, t *change.Table, ts *tableSQL) (bool, error) {
	if err := s.ensureSchema(ctx, t.ID.Schema); err != nil {
		return false, err
	}
	defs := make([]string, 0, len(t.Columns)+1)
	types := make(map[string]uint32, len(t.Columns))
	for i, c := range t.Columns {
		rt, err := s.resolveTypeOID(ctx, c)
		if err != nil {
			return false, err
		}
		typ := rt.name
		types[c.Name] = rt.oid
		def := ts.cols[i] + " " + typ
		if expr, ok := generatedExpr(t, i); ok {
			def += " GENERATED ALWAYS AS (" + expr + ") STORED"
		}
		if ts.isKey[i] {
			coll, err := keyCollation(t, c, typ)
			if err != nil {
				return false, err
			}
			def += coll
		}
		defs = append(defs, def)
	}
	defs = append(defs, "PRIMARY KEY ("+ts.keyColumns()+")")
	// Not IF NOT EXISTS: a table another session made meanwhile is told
	// apart (duplicate_table), as one this did not shape.
	ddl := "CREATE TABLE " + ts.name + " (" + strings.Join(defs, ", ") + ")"
	if _, err := s.conn.Exec(ctx, ddl); err != nil {
		if madeMeanwhile(err, "42P07") {
			// Another name may have collided (a type's, an index's): a
			// table must be there now.
			if ok, xerr := s.isTable(ctx, ts.name); xerr == nil && ok {
				return false, nil
			}
		}
		if typeTaken(err) {
			// An enum, domain or range type of the name: a table's row
			// type would need it.
			return false, fmt.Errorf("%s in the destination is the name of a type, not a table: %w; drop or rename it there, or exclude the table from the stream", t.ID, sink.ErrTableName)
		}
		return false, fmt.Errorf("create table: %w", err)
	}
	// What the table was made with is what a chunk's check would read: the
	// table's first chunk may then be read in binary (TakesBinary), and is
	// checked in its own transaction as every binary chunk is.
	s.destTypes.set(t.ID, types)
	return true, nil
}

// computes: the destination computes a stored generated column of the
// source itself when its expression renders (see internal/genexpr); the
// others are plain columns, their values read from the source.
func computes(t *change.Table, i int) bool { return genexpr.Computes(genexpr.PostgreSQL, t, i) }

// Computes reports whether the destination computes column i of t: see
// sink.Computer.
func (s *Sink) Computes(t *change.Table, i int) bool { return computes(t, i) }

// generatedExpr is the expression the destination computes column i of t
// with, rendered by tidemark; false when it does not compute it.
func generatedExpr(t *change.Table, i int) (string, bool) {
	if t.Columns[i].Generated == "" {
		return "", false
	}
	expr, err := genexpr.Render(genexpr.PostgreSQL, t, i)
	return expr, err == nil
}

// keyCollation keeps a key column's order the source's: key collations and
// types decide range comparisons, and chunk bounds must mean the same thing
// here. A collation that sorts like bytes becomes "C"; another named one is
// kept (the destination must have it); the source database's unnamed
// default, or a key type replaced by text, cannot be matched and is refused.
func keyCollation(t *change.Table, c change.Column, typ string) (string, error) {
	switch {
	case typ == "text" && c.Type != "text" && c.BaseOID >= firstNormalOID:
		return "", fmt.Errorf("table %s: key column %q has type %s, which the destination stores as text in another order: %w; create the type in the destination first", t.ID, c.Name, c.Type, sink.ErrKeyOrder)
	case c.Collation == "":
		return "", nil
	case sortKeyCollation(c) != nil:
		// Compared through its sort key (keycoll.go), not its collation.
		return "", nil
	case c.ByteOrder:
		return ` COLLATE "C"`, nil
	case c.Collation == "default":
		return "", fmt.Errorf("table %s: key column %q uses the source database's default collation, which tidemark cannot name: %w; give the column an explicit collation", t.ID, c.Name, sink.ErrKeyOrder)
	case c.Native != "":
		// Another source's collation (MySQL's utf8mb4_general_ci, say) has
		// no PostgreSQL collation of the same name and order.
		return "", fmt.Errorf("table %s: key column %q (%s) uses the source's collation %s, which PostgreSQL has no equivalent of: %w; key the table by a column with a binary (_bin) collation, one of %s, or a number, or name such key columns under keys: in the config", t.ID, c.Name, c.Native, c.Collation, sink.ErrKeyOrder, strings.Join(collate.Names(), ", "))
	}
	return " COLLATE " + quote(c.Collation), nil
}

// resolveType maps a source column type to a destination type name:
//   - the source's type when the destination has it (its canonical spelling,
//     typmod kept);
//   - else, for a domain over a built-in type, that base type;
//   - else (enums, composite and other user-defined types) text, which holds
//     the source's text form losslessly.
//
// The type string is never spliced into DDL as given: to_regtype (a
// parameter) checks that it parses as a single type name first, and the DDL
// uses format_type's output.
//
// A type the destination has is resolved once per sink (three round trips
// a column made a stream of many tables slow to start); a type it lacks
// (text, or a domain's base type) is asked again, so that a type created
// in the destination since is used. A statement that finds a remembered
// type or schema gone has the sink forget them (forgetGone).
func (s *Sink) resolveType(ctx context.Context, c change.Column) (string, error) {
	rt, err := s.resolveTypeOID(ctx, c)
	return rt.name, err
}

// resolvedType is a destination type: its name as format_type spells it,
// and its oid.
type resolvedType struct {
	name string
	oid  uint32
}

// resolveTypeOID is resolveType with the type's oid.
func (s *Sink) resolveTypeOID(ctx context.Context, c change.Column) (resolvedType, error) {
	key := resolveKey{typ: c.Type, oid: c.TypeOID, base: c.BaseOID}
	if rt, ok := s.resolved[key]; ok {
		return rt, nil
	}
	rt, known, err := s.lookUpType(ctx, c)
	if err != nil || !known {
		return rt, err
	}
	if s.resolved == nil {
		s.resolved = map[resolveKey]resolvedType{}
	}
	s.resolved[key] = rt
	return rt, nil
}

// forgetGone drops the remembered schemas and types when err says one
// does not exist (dropped since), so that the next attempt looks again.
func (s *Sink) forgetGone(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "3F000" || pgErr.Code == "42704") {
		s.schemas, s.resolved = nil, nil
		return true
	}
	return false
}

// resolveKey is what resolveType's answer depends on.
type resolveKey struct {
	typ       string
	oid, base uint32
}

func (s *Sink) lookUpType(ctx context.Context, c change.Column) (rt resolvedType, known bool, err error) {
	if err := s.conn.QueryRow(ctx, "SELECT to_regtype($1) IS NOT NULL", c.Type).Scan(&known); err != nil {
		return rt, false, fmt.Errorf("resolve type %q of column %q: %w", c.Type, c.Name, err)
	}
	switch {
	case known:
		// Describing the cast yields the type's oid and typmod.
		sd, err := s.conn.PgConn().Prepare(ctx, "", "SELECT NULL::"+c.Type, nil)
		if err != nil {
			return rt, false, fmt.Errorf("describe type %q of column %q: %w", c.Type, c.Name, err)
		}
		f := sd.Fields[0]
		rt.oid = f.DataTypeOID
		err = s.conn.QueryRow(ctx, "SELECT format_type($1, $2)", f.DataTypeOID, f.TypeModifier).Scan(&rt.name)
		if err != nil {
			return rt, false, fmt.Errorf("format type %q of column %q: %w", c.Type, c.Name, err)
		}
	case c.BaseOID != 0 && c.BaseOID != c.TypeOID && c.BaseOID < firstNormalOID:
		rt.oid = c.BaseOID
		err := s.conn.QueryRow(ctx, "SELECT format_type($1, NULL)", c.BaseOID).Scan(&rt.name)
		if err != nil {
			return rt, false, fmt.Errorf("format base type %d of column %q: %w", c.BaseOID, c.Name, err)
		}
	default:
		return resolvedType{name: "text", oid: textOID}, false, nil
	}
	return rt, known, nil
}

// textOID is the oid of type text.
const textOID = 25

// ensureCheckpointTables creates _tidemark.checkpoint and _tidemark.cursor.
// Positions are LSNs stored bit for bit in a bigint, beside the source's
// resume token (text); after_key is the cursor
// key as a JSON array of {"t": text, "n": is-null}.
func (s *Sink) ensureCheckpointTables(ctx context.Context) error {
	ddl := map[string]string{
		`"_tidemark"."checkpoint"`: `CREATE TABLE IF NOT EXISTS "_tidemark"."checkpoint" (
			"stream" text PRIMARY KEY,
			"position" bigint NOT NULL,
			"resume" text NOT NULL DEFAULT '',
			"updated_at" timestamptz NOT NULL DEFAULT now())`,
		`"_tidemark"."cursor"`: `CREATE TABLE IF NOT EXISTS "_tidemark"."cursor" (
			"stream" text NOT NULL,
			"schema_name" text NOT NULL,
			"table_name" text NOT NULL,
			"backfill_id" bigint NOT NULL,
			"after_key" jsonb,
			"done" boolean NOT NULL,
			"rows" bigint NOT NULL,
			"updated_at" timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY ("stream", "schema_name", "table_name"))`,
	}
	if err := s.ensureSchema(ctx, "_tidemark"); err != nil {
		return fmt.Errorf("create checkpoint tables: %w", err)
	}
	for _, name := range []string{`"_tidemark"."checkpoint"`, `"_tidemark"."cursor"`} {
		ok, err := s.exists(ctx, name)
		if err != nil {
			return fmt.Errorf("look up %s: %w", name, err)
		}
		if ok {
			continue
		}
		if _, err := s.conn.Exec(ctx, ddl[name]); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	return s.ensureResumeColumn(ctx)
}

// ensureResumeColumn adds the resume column to a checkpoint table created
// before resume tokens were stored; its rows read as an empty token, which
// resumes by position alone. It looks first so that opening a sink takes no
// exclusive lock on the checkpoint table when there is nothing to add.
func (s *Sink) ensureResumeColumn(ctx context.Context) error {
	var has bool
	err := s.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = '"_tidemark"."checkpoint"'::regclass AND attname = 'resume' AND NOT attisdropped)`).Scan(&has)
	if err != nil {
		return fmt.Errorf("look up the resume column of the checkpoint table: %w", err)
	}
	if has {
		return nil
	}
	if _, err := s.conn.Exec(ctx, `ALTER TABLE "_tidemark"."checkpoint"
		ADD COLUMN IF NOT EXISTS "resume" text NOT NULL DEFAULT ''`); err != nil {
		return fmt.Errorf("add the resume column to the checkpoint table: %w", err)
	}
	return nil
}
