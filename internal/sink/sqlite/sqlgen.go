package sqlite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/genexpr"
	"github.com/tidemark/tidemark/internal/sink"
)

// tableSQL holds a table's quoted identifiers and storage kinds, and
// memoizes the statements built from them. Values are always bound.
type tableSQL struct {
	name  string   // one quoted identifier, see tableName
	cols  []string // quoted column names, in column order
	kinds []kind
	key   []int // indexes into cols, in key order
	isKey []bool
	// gen holds the expressions of the generated columns SQLite computes
	// (see computes), "" for the others.
	gen []string
	// coll holds the collation of key columns compared like a source
	// collation (see sourceCollation), "" for the others.
	coll []string
	memo sink.Memo
}

// tableName is the source table's name for public tables and
// "schema.table" (one identifier) otherwise.
func tableName(id change.TableID) string {
	if id.Schema == "public" {
		return id.Name
	}
	return id.Schema + "." + id.Name
}

// quote makes s one SQLite identifier.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func newTableSQL(t *change.Table) (*tableSQL, error) {
	if len(t.Key) == 0 {
		return nil, fmt.Errorf("table %s has no key", t.ID)
	}
	ts := &tableSQL{
		name:  quote(tableName(t.ID)),
		cols:  make([]string, len(t.Columns)),
		kinds: make([]kind, len(t.Columns)),
		key:   t.Key,
		isKey: make([]bool, len(t.Columns)),
		gen:   make([]string, len(t.Columns)),
		coll:  make([]string, len(t.Columns)),
		memo:  sink.Memo{},
	}
	for i, c := range t.Columns {
		ts.cols[i] = quote(c.Name)
		ts.kinds[i] = kindOf(c)
		ts.gen[i], _ = generatedExpr(t, i)
	}
	for _, k := range t.Key {
		if k < 0 || k >= len(t.Columns) {
			return nil, fmt.Errorf("table %s: key index %d out of range", t.ID, k)
		}
		ts.isKey[k] = true
		ts.coll[k], _ = sourceCollation(t.Columns[k])
	}
	return ts, nil
}

func (ts *tableSQL) createSQL() string {
	defs := make([]string, 0, len(ts.cols)+1)
	for i, c := range ts.cols {
		def := c + " " + ts.kinds[i].declType()
		if ts.gen[i] != "" {
			def += " GENERATED ALWAYS AS (" + ts.gen[i] + ") STORED"
		}
		if ts.isKey[i] {
			// SQLite lets PRIMARY KEY columns hold NULL unless told.
			def += " NOT NULL"
		}
		if ts.coll[i] != "" {
			def += " COLLATE " + quote(ts.coll[i])
		}
		defs = append(defs, def)
	}
	defs = append(defs, "PRIMARY KEY ("+ts.keyList()+")")
	return "CREATE TABLE IF NOT EXISTS " + ts.name + " (" + strings.Join(defs, ", ") + ")"
}

// computes: SQLite computes a stored generated column of the source itself
// when its expression translates to one with the same values for every
// row (see internal/genexpr); the others are plain columns, their values
// read from the source.
func computes(t *change.Table, i int) bool { return genexpr.Computes(genexpr.SQLite, t, i) }

// Computes reports whether SQLite computes column i of t: see
// sink.Computer.
func (s *Sink) Computes(t *change.Table, i int) bool { return computes(t, i) }

// generatedExpr is the SQLite expression computing column i of t; false
// when SQLite does not compute it.
func generatedExpr(t *change.Table, i int) (string, bool) {
	if t.Columns[i].Generated == "" {
		return "", false
	}
	expr, err := genexpr.Render(genexpr.SQLite, t, i)
	return expr, err == nil
}

func (ts *tableSQL) list(pick func(i int) bool) string {
	var parts []string
	for i, c := range ts.cols {
		if pick(i) {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, ", ")
}

func (ts *tableSQL) keyList() string { return ts.pick(ts.key) }

func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

func maskKey(prefix string, m ...[]bool) string {
	b := []byte(prefix)
	for _, part := range m {
		b = append(b, '/')
		for _, v := range part {
			if v {
				b = append(b, '1')
			} else {
				b = append(b, '0')
			}
		}
	}
	return string(b)
}

// upsertSQL inserts the ins columns and on conflict updates the set
// columns; onlyChanged skips the write when those are already equal.
func (ts *tableSQL) upsertSQL(ins, set []bool, onlyChanged bool) string {
	return ts.memo.Get(maskKey("upsert", ins, set, []bool{onlyChanged}), func() string {
		n := 0
		for _, v := range ins {
			if v {
				n++
			}
		}
		var sets, diffs []string
		for i, c := range ts.cols {
			if set[i] {
				sets = append(sets, c+" = excluded."+c)
				// BINARY: a key differing only as its collation folds
				// (case, accents) is still a change of spelling.
				diffs = append(diffs, ts.name+"."+c+" COLLATE BINARY IS NOT excluded."+c)
			}
		}
		sql := "INSERT INTO " + ts.name + " (" + ts.list(func(i int) bool { return ins[i] }) +
			") VALUES (" + marks(n) + ") ON CONFLICT (" + ts.keyList() + ") DO "
		if len(sets) == 0 {
			return sql + "NOTHING"
		}
		sql += "UPDATE SET " + strings.Join(sets, ", ")
		if onlyChanged {
			sql += " WHERE " + strings.Join(diffs, " OR ")
		}
		return sql
	})
}

func (ts *tableSQL) keyMatch() string {
	parts := make([]string, len(ts.key))
	for i, k := range ts.key {
		parts[i] = ts.cols[k] + " = ?"
	}
	return strings.Join(parts, " AND ")
}

// updateSQL sets the set columns of the row whose key follows them.
func (ts *tableSQL) updateSQL(set []bool) string {
	return ts.memo.Get(maskKey("update", set), func() string {
		var sets []string
		for i, c := range ts.cols {
			if set[i] {
				sets = append(sets, c+" = ?")
			}
		}
		return "UPDATE " + ts.name + " SET " + strings.Join(sets, ", ") + " WHERE " + ts.keyMatch()
	})
}

func (ts *tableSQL) deleteSQL() string {
	return ts.memo.Get("delete", func() string {
		return "DELETE FROM " + ts.name + " WHERE " + ts.keyMatch()
	})
}

// selectByKeySQL reads the cols columns (indexes) of the row with a key.
func (ts *tableSQL) selectByKeySQL(cols []int) string {
	return ts.memo.Get(indexKey("byKey", cols), func() string {
		return "SELECT " + ts.pick(cols) + " FROM " + ts.name + " WHERE " + ts.keyMatch()
	})
}

// pick lists the quoted columns at the indexes cols, in that order.
func (ts *tableSQL) pick(cols []int) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = ts.cols[c]
	}
	return strings.Join(parts, ", ")
}

func indexKey(prefix string, cols []int) string {
	b := []byte(prefix)
	for _, c := range cols {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return string(b)
}

// rangeCond restricts the key to (low, high] by row-value comparison,
// low's parameters first.
func (ts *tableSQL) rangeCond(low, high bool) string {
	k, m := "("+ts.keyList()+")", "("+marks(len(ts.key))+")"
	var conds []string
	if low {
		conds = append(conds, k+" > "+m)
	}
	if high {
		conds = append(conds, k+" <= "+m)
	}
	if len(conds) == 0 {
		return "1"
	}
	return strings.Join(conds, " AND ")
}

// selectRangeSQL reads the cols columns (indexes) of the rows in
// (low, high], in key order.
func (ts *tableSQL) selectRangeSQL(cols []int, low, high bool) string {
	return ts.memo.Get(indexKey(maskKey("range", []bool{low, high}), cols), func() string {
		return "SELECT " + ts.pick(cols) + " FROM " + ts.name +
			" WHERE " + ts.rangeCond(low, high) + " ORDER BY " + ts.keyList()
	})
}
