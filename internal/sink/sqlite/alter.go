package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

var _ sink.Alterer = (*Sink)(nil)

// destColumn is a column of a destination table as PRAGMA table_xinfo
// gives it.
type destColumn struct {
	name      string
	decl      string // declared type
	pk        int    // position in the primary key from 1, 0 outside it
	generated bool   // a generated column, stored or virtual
}

// AlterTable changes the destination table of t by steps, in one
// transaction (see sink.Alterer and docs/schema-changes.md). SQLite's types
// are its storage classes (docs/type-mapping.md), so most type changes
// leave the table alone: an integer or text stays one. real to double
// precision rewrites the stored values, each the double of its real, which
// is what the source's ALTER did to them. An added column's Default is its
// DEFAULT; float defaults are also written into the rows already there,
// since SQLite parses the DEFAULT's text itself.
func (s *Sink) AlterTable(ctx context.Context, t *change.Table, steps []sink.AlterStep) error {
	if err := s.inTurn(ctx, func() error { return s.alterTable(ctx, t, steps) }); err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !busy(err) && !ioTrouble(err) {
			return fmt.Errorf("alter table %s: %w: %w", t.ID, sink.ErrRejected, err)
		}
		return fmt.Errorf("alter table %s: %w", t.ID, err)
	}
	return nil
}

// ioTrouble is a failure of the file rather than of the change (disk full,
// an I/O error, a file that cannot be opened): a retry may cure it.
func ioTrouble(err error) bool {
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		return false
	}
	switch coded.Code() & 0xff {
	case 5, 6, 10, 13, 14: // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN
		return true
	}
	return false
}

// busy tells a locked database (another process writing) from a refusal.
func busy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

func (s *Sink) alterTable(ctx context.Context, t *change.Table, steps []sink.AlterStep) error {
	ts, err := s.table(t)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	for _, st := range steps {
		cols, err := tableInfo(ctx, tx, ts.name)
		if err != nil {
			return err
		}
		if err := alterStep(ctx, tx, ts, cols, st); err != nil {
			return fmt.Errorf("%s %q: %w", st.Kind, st.Column.Name, err)
		}
	}
	return tx.Commit()
}

func alterStep(ctx context.Context, tx *sql.Tx, ts *tableSQL, cols []destColumn, st sink.AlterStep) error {
	has := func(name string) bool {
		return slices.ContainsFunc(cols, func(c destColumn) bool { return c.name == name })
	}
	col := quote(st.Column.Name)
	switch st.Kind {
	case sink.AddColumn:
		if has(st.Column.Name) {
			return nil
		}
		k := kindOf(st.Column)
		ddl := "ALTER TABLE " + ts.name + " ADD COLUMN " + col + " " + k.declType()
		if expr := ts.genOf(st.Column.Name); expr != "" {
			_, err := tx.ExecContext(ctx, ddl+generatedAdded(expr))
			return err
		}
		var v any
		if st.Default != nil {
			v = encode(k, *st.Default)
		}
		if v != nil {
			ddl += " DEFAULT " + sqlLiteral(v)
		}
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return err
		}
		if _, isFloat := v.(float64); isFloat {
			_, err := tx.ExecContext(ctx, "UPDATE "+ts.name+" SET "+col+" = ?", v)
			return err
		}
		return nil
	case sink.RenameColumn:
		from, to := has(st.Prev.Name), has(st.Column.Name)
		switch {
		case !from && to:
			return nil
		case !from || to:
			return fmt.Errorf("cannot rename column %q to %q: the destination table has %s", st.Prev.Name, st.Column.Name, names(cols))
		}
		_, err := tx.ExecContext(ctx, "ALTER TABLE "+ts.name+" RENAME COLUMN "+quote(st.Prev.Name)+" TO "+col)
		return err
	case sink.SetType:
		if !has(st.Column.Name) {
			return fmt.Errorf("no column %q in the destination table (it has %s)", st.Column.Name, names(cols))
		}
		from, to := kindOf(st.Prev), kindOf(st.Column)
		switch {
		case from == kindFloat4 && to == kindFloat8:
			return widenReals(ctx, tx, ts, col)
		case from.declType() != to.declType():
			return fmt.Errorf("SQLite cannot change a %s column into a %s one", from.declType(), to.declType())
		}
		return nil
	case sink.MakeGenerated:
		return makeGenerated(ctx, tx, ts, cols, st.Column)
	}
	return fmt.Errorf("unknown step %d", st.Kind)
}

// generatedAdded is the tail of an ADD COLUMN of a generated column:
// SQLite adds VIRTUAL ones only (computed when read, which verify and
// readers cannot tell from STORED). CREATE TABLE makes them STORED.
func generatedAdded(expr string) string { return " GENERATED ALWAYS AS (" + expr + ") VIRTUAL" }

// genOf is the expression SQLite computes the named column with, "" when
// it does not compute it.
func (ts *tableSQL) genOf(name string) string {
	for i, c := range ts.cols {
		if c == quote(name) {
			return ts.gen[i]
		}
	}
	return ""
}

// makeGenerated replaces a plain column by the generated column c: SQLite
// cannot turn a column into a generated one, so it is dropped (which SQLite
// refuses for a column in the key, an index or a constraint) and added
// again.
func makeGenerated(ctx context.Context, tx *sql.Tx, ts *tableSQL, cols []destColumn, c change.Column) error {
	i := slices.IndexFunc(cols, func(d destColumn) bool { return d.name == c.Name })
	if i >= 0 && cols[i].generated {
		return nil
	}
	expr := ts.genOf(c.Name)
	if expr == "" {
		return fmt.Errorf("SQLite cannot compute column %q", c.Name)
	}
	if i >= 0 {
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+ts.name+" DROP COLUMN "+quote(c.Name)); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "ALTER TABLE "+ts.name+" ADD COLUMN "+quote(c.Name)+" "+kindOf(c).declType()+generatedAdded(expr))
	return err
}

// widenReals turns each stored real into the double precision value
// PostgreSQL's cast gives it: the exact value of the single-precision
// number, printed with double precision's digits from then on.
func widenReals(ctx context.Context, tx *sql.Tx, ts *tableSQL, col string) error {
	rows, err := tx.QueryContext(ctx, "SELECT rowid, "+col+" FROM "+ts.name+" WHERE typeof("+col+") = 'real'")
	if err != nil {
		return err
	}
	type real struct {
		rowid int64
		v     float64
	}
	var reals []real
	for rows.Next() {
		var r real
		if err := rows.Scan(&r.rowid, &r.v); err != nil {
			rows.Close()
			return err
		}
		reals = append(reals, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range reals {
		w := float64(float32(r.v))
		if w == r.v || math.IsInf(w, 0) {
			continue
		}
		if _, err := tx.ExecContext(ctx, "UPDATE "+ts.name+" SET "+col+" = ? WHERE rowid = ?", w, r.rowid); err != nil {
			return err
		}
	}
	return nil
}

// sqlLiteral writes an encoded value as an SQLite constant.
func sqlLiteral(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []byte:
		return "X'" + hex.EncodeToString(v) + "'"
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return "NULL"
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

// tableInfo reads a table's columns (a quoted name); none when it does not
// exist.
func tableInfo(ctx context.Context, q querier, name string) ([]destColumn, error) {
	// table_xinfo, unlike table_info, lists generated columns (hidden 2
	// when virtual, 3 when stored).
	rows, err := q.QueryContext(ctx, "SELECT name, type, pk, hidden IN (2, 3) FROM pragma_table_xinfo(?)", unquote(name))
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", name, err)
	}
	defer rows.Close()
	var cols []destColumn
	for rows.Next() {
		var c destColumn
		if err := rows.Scan(&c.name, &c.decl, &c.pk, &c.generated); err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", name, err)
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// unquote undoes quote.
func unquote(s string) string {
	return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
}

// CheckTable compares the destination table of t with t: see
// sink.Alterer. A column fits when its declared type is the one the
// source column's type is stored as (docs/type-mapping.md).
func (s *Sink) CheckTable(ctx context.Context, t *change.Table) (sink.TableCheck, error) {
	var check sink.TableCheck
	ts, err := s.table(t)
	if err != nil {
		return check, err
	}
	cols, err := tableInfo(ctx, s.db, ts.name)
	if err != nil || len(cols) == 0 {
		return check, err
	}
	check.Exists = true
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	judge := func(c change.Column, i int) (*sink.AlterStep, string, error) {
		computed := ts.genOf(c.Name) != ""
		switch {
		case computed && !cols[i].generated:
			return &sink.AlterStep{Kind: sink.MakeGenerated, Column: c}, "", nil
		case computed:
			return nil, "", nil
		case cols[i].generated:
			why := "the source column is not a generated column"
			if c.Generated != "" {
				why = "SQLite cannot compute the source's expression (" + c.Generated + ") the same way, so tidemark writes the source's values"
			}
			return nil, fmt.Sprintf("column %q is a generated column in the destination, which refuses writes, but %s: drop the destination table", c.Name, why), nil
		}
		if want := kindOf(c).declType(); !strings.EqualFold(cols[i].decl, want) {
			return nil, fmt.Sprintf("column %q is declared %s in the destination; the source's %s is stored as %s: drop the destination table", c.Name, cols[i].decl, c.Type, want), nil
		}
		return nil, "", nil
	}
	drop := func(name string) string { return fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", ts.name, quote(name)) }
	if err := sink.CompareColumns(&check, t, names, judge, drop); err != nil {
		return check, err
	}
	key := map[int]string{}
	for _, c := range cols {
		if c.pk > 0 {
			key[c.pk] = c.name
		}
	}
	if p := sink.KeyProblem(t, key, "drop the destination table "+ts.name); p != "" {
		check.Problems = append(check.Problems, p)
	}
	return check, nil
}
