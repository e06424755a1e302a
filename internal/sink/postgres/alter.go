package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

var _ sink.Alterer = (*Sink)(nil)

// destColumn is a column of a destination table as its catalog holds it.
type destColumn struct {
	name   string
	typ    string // format_type
	oid    uint32
	mod    int32
	keyPos int // position in the primary key, -1 outside it
	// generated: a stored generated column the destination computes
	generated bool
}

// AlterTable changes the destination table of t by steps, in one
// transaction (see sink.Alterer and docs/schema-changes.md). Added columns
// get the step's Default as their DEFAULT, a constant: PostgreSQL gives it
// to the rows already there without rewriting them, and it stays the
// column's default. Statements prepared on the connection and the staging
// table of chunks are dropped, since their column lists or types changed.
func (s *Sink) AlterTable(ctx context.Context, t *change.Table, steps []sink.AlterStep) error {
	s.justCreated = nil
	if err := s.ensureConn(ctx); err != nil {
		return fmt.Errorf("alter table %s: %w", t.ID, err)
	}
	err := s.alterTable(ctx, t, steps)
	if s.forgetGone(err) {
		err = s.alterTable(ctx, t, steps) // with the types looked up again
	}
	if err != nil {
		// Only an outage is retried: a change the destination table cannot
		// take (a column missing, renamed by hand, a key it cannot order)
		// would be retried forever and stall the stream. A fenced owner's
		// change is the new owner's to make: no fault of the table.
		if !errors.Is(err, sink.ErrFenced) && (rejected(err) || !outage(err)) {
			return fmt.Errorf("alter table %s: %w: %w", t.ID, sink.ErrRejected, err)
		}
		return fmt.Errorf("alter table %s: %w", t.ID, err)
	}
	return nil
}

func (s *Sink) alterTable(ctx context.Context, t *change.Table, steps []sink.AlterStep) error {
	ts, err := s.table(t)
	if err != nil {
		return err
	}
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := s.checkFence(ctx); err != nil {
		return err
	}
	for _, st := range steps {
		cols, err := s.destColumns(ctx, ts.name)
		if err != nil {
			return err
		}
		ddl, err := s.alterSQL(ctx, t, ts, cols, st)
		if err != nil {
			return fmt.Errorf("%s %q: %w", st.Kind, st.Column.Name, err)
		}
		if ddl == "" {
			continue // done already
		}
		if _, err := s.conn.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("%s: %w", ddl, err)
		}
	}
	if _, err := s.conn.Exec(ctx, "DROP TABLE IF EXISTS "+ts.tmp); err != nil {
		return fmt.Errorf("drop staging table: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.staging.forget(t.ID)
	// A prepared statement must not change its result's types; rather
	// than track which ones read the table, start over.
	s.dropStatements(ctx)
	return nil
}

// dropStatements deallocates the statements the sink prepared.
func (s *Sink) dropStatements(ctx context.Context) {
	for _, name := range s.stmts {
		s.conn.PgConn().Exec(ctx, "DEALLOCATE "+quote(name)).ReadAll()
	}
	clear(s.stmts)
}

// stalePlan tells the error of a prepared statement whose result's types
// changed under it (a destination table altered by hand): preparing it
// again cures it.
func stalePlan(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "0A000" && strings.Contains(pgErr.Message, "cached plan")
}

// alterSQL is the statement of one step, "" when the table is there already.
func (s *Sink) alterSQL(ctx context.Context, t *change.Table, ts *tableSQL, cols []destColumn, st sink.AlterStep) (string, error) {
	find := func(name string) *destColumn {
		for i := range cols {
			if cols[i].name == name {
				return &cols[i]
			}
		}
		return nil
	}
	col := quote(st.Column.Name)
	switch st.Kind {
	case sink.AddColumn:
		if find(st.Column.Name) != nil {
			return "", nil
		}
		typ, err := s.resolveType(ctx, st.Column)
		if err != nil {
			return "", err
		}
		ddl := "ALTER TABLE " + ts.name + " ADD COLUMN " + col + " " + typ
		if expr, ok := generatedIn(t, st.Column); ok {
			return ddl + " GENERATED ALWAYS AS (" + expr + ") STORED", nil
		}
		if st.Default != nil && !st.Default.Null {
			ddl += " DEFAULT " + literal(st.Default.Text) + "::" + typ
		}
		return ddl, nil
	case sink.RenameColumn:
		from, to := find(st.Prev.Name), find(st.Column.Name)
		switch {
		case from == nil && to != nil:
			return "", nil
		case from == nil || to != nil:
			return "", fmt.Errorf("cannot rename column %q to %q: the destination table has %s", st.Prev.Name, st.Column.Name, names(cols))
		}
		return "ALTER TABLE " + ts.name + " RENAME COLUMN " + quote(st.Prev.Name) + " TO " + col, nil
	case sink.SetType:
		cur := find(st.Column.Name)
		if cur == nil {
			return "", fmt.Errorf("no column %q in the destination table (it has %s)", st.Column.Name, names(cols))
		}
		typ, err := s.resolveType(ctx, st.Column)
		if err != nil {
			return "", err
		}
		if cur.typ == typ {
			return "", nil
		}
		var coll string
		if i := t.ColumnIndex(st.Column.Name); i >= 0 && ts.isKey[i] {
			if coll, err = keyCollation(t, st.Column, typ); err != nil {
				return "", err
			}
		}
		return "ALTER TABLE " + ts.name + " ALTER COLUMN " + col + " TYPE " + typ + coll + " USING " + col + "::" + typ, nil
	case sink.MakeGenerated:
		return s.makeGeneratedSQL(ctx, t, ts, find(st.Column.Name), st.Column)
	}
	return "", fmt.Errorf("unknown step %d", st.Kind)
}

// generatedIn is the rendered expression of column c of t, false when the
// destination does not compute it.
func generatedIn(t *change.Table, c change.Column) (string, bool) {
	i := t.ColumnIndex(c.Name)
	if i < 0 {
		return "", false
	}
	return generatedExpr(t, i)
}

// makeGeneratedSQL replaces the plain column cur (nil: none) by the
// generated column c in one statement: PostgreSQL cannot turn a column
// into a generated one, so it is dropped and added again, which computes
// it for every row. Its position in the table changes; tidemark names
// columns.
func (s *Sink) makeGeneratedSQL(ctx context.Context, t *change.Table, ts *tableSQL, cur *destColumn, c change.Column) (string, error) {
	if cur != nil && cur.generated {
		return "", nil
	}
	expr, ok := generatedIn(t, c)
	if !ok {
		return "", fmt.Errorf("the destination cannot compute column %q", c.Name)
	}
	typ, err := s.resolveType(ctx, c)
	if err != nil {
		return "", err
	}
	ddl := "ALTER TABLE " + ts.name + " "
	if cur != nil {
		ddl += "DROP COLUMN " + quote(c.Name) + ", "
	}
	return ddl + "ADD COLUMN " + quote(c.Name) + " " + typ + " GENERATED ALWAYS AS (" + expr + ") STORED", nil
}

// literal quotes a value as an escape string constant, whatever
// standard_conforming_strings says.
func literal(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

func names(cols []destColumn) string {
	if len(cols) == 0 {
		return "no columns"
	}
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quote(c.name)
	}
	return "columns " + strings.Join(q, ", ")
}

// destColumns reads the columns of a destination table (a quoted,
// qualified name) in column order; none when it does not exist.
func (s *Sink) destColumns(ctx context.Context, qualified string) ([]destColumn, error) {
	rows, err := s.conn.Query(ctx, `
		SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.atttypid, a.atttypmod,
		       COALESCE((SELECT array_position(i.indkey::int2[], a.attnum) FROM pg_index i
		                 WHERE i.indrelid = a.attrelid AND i.indisprimary), -1),
		       a.attgenerated = 's'
		FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, qualified)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", qualified, err)
	}
	defer rows.Close()
	var cols []destColumn
	for rows.Next() {
		var c destColumn
		if err := rows.Scan(&c.name, &c.typ, &c.oid, &c.mod, &c.keyPos, &c.generated); err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", qualified, err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", qualified, err)
	}
	return cols, nil
}

// CheckTable compares the destination table of t with t: see
// sink.Alterer. A destination column fits when its type is the type the
// source column maps to (docs/type-mapping.md) or one that widens it; a
// narrower one is widened.
func (s *Sink) CheckTable(ctx context.Context, t *change.Table) (sink.TableCheck, error) {
	fresh := t != nil && t == s.justCreated
	s.justCreated = nil
	if fresh {
		// EnsureTable has just made the table from t: it has t's shape,
		// and the server need not be asked (a stream's start checks each
		// table it creates, a thousand of them on a first start).
		return sink.TableCheck{Exists: true}, nil
	}
	check, err := s.checkTable(ctx, t)
	if s.forgetGone(err) {
		check, err = s.checkTable(ctx, t) // with the types looked up again
	}
	return check, err
}

func (s *Sink) checkTable(ctx context.Context, t *change.Table) (sink.TableCheck, error) {
	var check sink.TableCheck
	if err := s.ensureConn(ctx); err != nil {
		return check, err
	}
	ts, err := s.table(t)
	if err != nil {
		return check, err
	}
	cols, err := s.destColumns(ctx, ts.name)
	if err != nil || len(cols) == 0 {
		if err == nil {
			s.destTypes.set(t.ID, nil) // no table: what was seen of it is gone
		}
		return check, err
	}
	check.Exists = true
	names := make([]string, len(cols))
	types := make(map[string]uint32, len(cols))
	for i, c := range cols {
		names[i] = c.name
		types[c.name] = c.oid
	}
	// As a chunk's check would: see createTable.
	s.destTypes.set(t.ID, types)
	judge := func(c change.Column, i int) (*sink.AlterStep, string, error) {
		if step, problem, judged := generatedFits(t, ts, c, cols[i]); judged {
			return step, problem, nil
		}
		return s.compareType(ctx, t, c, cols[i])
	}
	drop := func(name string) string { return fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", ts.name, quote(name)) }
	if err := sink.CompareColumns(&check, t, names, judge, drop); err != nil {
		return check, err
	}
	if p := keyProblem(t, ts, cols); p != "" {
		check.Problems = append(check.Problems, p)
	}
	return check, nil
}

// generatedFits judges a column the destination computes, or one it holds
// as a generated column: a plain column the destination should compute is
// replaced (MakeGenerated); a generated one tidemark must write cannot be
// written. judged is false when neither is the case.
func generatedFits(t *change.Table, ts *tableSQL, c change.Column, d destColumn) (step *sink.AlterStep, problem string, judged bool) {
	_, computed := generatedIn(t, c)
	switch {
	case computed && !d.generated:
		return &sink.AlterStep{Kind: sink.MakeGenerated, Column: c}, "", true
	case computed:
		return nil, "", true
	case d.generated:
		why := "the source column is not a generated column"
		if c.Generated != "" {
			why = "the destination cannot compute the source's expression (" + c.Generated + "), so tidemark writes the source's values"
		}
		return nil, fmt.Sprintf("column %q is a generated column in the destination, which refuses writes, but %s: make it a plain column (ALTER TABLE %s ALTER COLUMN %s DROP EXPRESSION)",
			c.Name, why, ts.name, quote(c.Name)), true
	}
	return nil, "", false
}

// compareType judges the destination column d of the source column c.
func (s *Sink) compareType(ctx context.Context, t *change.Table, c change.Column, d destColumn) (*sink.AlterStep, string, error) {
	typ, err := s.resolveType(ctx, c)
	if err != nil {
		return nil, "", err
	}
	if typ == d.typ {
		return nil, "", nil
	}
	sd, err := s.conn.PgConn().Prepare(ctx, "", "SELECT NULL::"+typ, nil)
	if err != nil {
		return nil, "", fmt.Errorf("describe type %s of column %q: %w", typ, c.Name, err)
	}
	want := change.Column{Name: c.Name, Type: typ, TypeOID: sd.Fields[0].DataTypeOID, TypeMod: sd.Fields[0].TypeModifier}
	have := change.Column{Name: c.Name, Type: d.typ, TypeOID: d.oid, TypeMod: d.mod}
	switch {
	case change.Widens(want, have):
		return nil, "", nil // the destination's type holds every value
	case change.Widens(have, want):
		return &sink.AlterStep{Kind: sink.SetType, Column: c, Prev: have}, "", nil
	}
	return nil, fmt.Sprintf("column %q is %s in the destination, which cannot hold the source's %s: change its type (ALTER TABLE %s ALTER COLUMN %s TYPE %s) or drop the destination table",
		c.Name, d.typ, c.Type, pgxName(t.ID), quote(c.Name), typ), nil
}

// keyProblem compares the destination's primary key with the table's key.
func keyProblem(t *change.Table, ts *tableSQL, cols []destColumn) string {
	key := map[int]string{}
	for _, c := range cols {
		if c.keyPos >= 0 {
			key[c.keyPos] = c.name
		}
	}
	return sink.KeyProblem(t, key, "give "+ts.name+" that primary key or drop it")
}

func pgxName(id change.TableID) string { return quote(id.Schema) + "." + quote(id.Name) }

// outage tells a failure of the connection or the server (which a retry
// may cure) from one of the statement.
func outage(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// connection exception, insufficient resources, operator
		// intervention (shutdown), transaction rollback (serialization)
		for _, class := range []string{"08", "53", "57", "40"} {
			if strings.HasPrefix(pgErr.Code, class) {
				return true
			}
		}
		return false
	}
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr)
}
