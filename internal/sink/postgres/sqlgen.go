package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/pgsum"
	"github.com/tidemark/tidemark/internal/sink"
)

// tableSQL holds a table's quoted identifiers and memoizes the statements
// built from them. Every identifier is quoted; values only ever travel as
// parameters.
type tableSQL struct {
	id    change.TableID
	name  string   // "schema"."table"
	tmp   string   // this session's staging table for chunks
	cols  []string // quoted column names, in column order
	key   []int    // indexes into cols, in key order
	isKey []bool
	// keyFn holds, per key column (in key order), the sort key function it
	// is compared through, "" for a column compared as itself; sortKeys is
	// set when some key column has one (see keycoll.go).
	keyFn    []string
	sortKeys bool
	memo     sink.Memo
}

func newTableSQL(t *change.Table) (*tableSQL, error) {
	if len(t.Key) == 0 {
		return nil, fmt.Errorf("table %s has no key", t.ID)
	}
	ts := &tableSQL{
		id:    t.ID,
		name:  pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize(),
		tmp:   stagingName(t.ID),
		cols:  make([]string, len(t.Columns)),
		key:   t.Key,
		isKey: make([]bool, len(t.Columns)),
		keyFn: make([]string, len(t.Key)),
		memo:  sink.Memo{},
	}
	for i, c := range t.Columns {
		ts.cols[i] = quote(c.Name)
	}
	for _, k := range t.Key {
		if k < 0 || k >= len(t.Columns) {
			return nil, fmt.Errorf("table %s: key index %d out of range", t.ID, k)
		}
		ts.isKey[k] = true
	}
	for i, c := range t.KeyColumns() {
		if coll := sortKeyCollation(c); coll != nil {
			ts.keyFn[i], ts.sortKeys = sortKeyFunc(coll.Name), true
		}
	}
	return ts, nil
}

func quote(s string) string { return pgx.Identifier{s}.Sanitize() }

// stagingName derives the staging table's name from the table's identity,
// so that it is the same on every connection and fits in NAMEDATALEN; it is
// qualified by pg_temp so that it never names a table of the database.
func stagingName(id change.TableID) string {
	h := sha256.Sum256([]byte(id.Schema + "\x00" + id.Name))
	return "pg_temp." + quote("_tidemark_chunk_"+hex.EncodeToString(h[:12]))
}

// list joins the quoted columns selected by pick, each prefixed by alias.
func (ts *tableSQL) list(alias string, pick func(i int) bool) string {
	var b strings.Builder
	for i, c := range ts.cols {
		if !pick(i) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(alias)
		b.WriteString(c)
	}
	return b.String()
}

// keyList lists the key as the sink compares it (see keyExpr).
func (ts *tableSQL) keyList(alias string) string {
	parts := make([]string, len(ts.key))
	for i, k := range ts.key {
		parts[i] = ts.keyExpr(alias+ts.cols[k], i)
	}
	return strings.Join(parts, ", ")
}

// keyColumns lists the key columns themselves.
func (ts *tableSQL) keyColumns() string {
	parts := make([]string, len(ts.key))
	for i, k := range ts.key {
		parts[i] = ts.cols[k]
	}
	return strings.Join(parts, ", ")
}

// keyParams is a key's parameters $from.. as the sink compares them.
func (ts *tableSQL) keyParams(from int) string {
	parts := make([]string, len(ts.key))
	for i := range parts {
		parts[i] = ts.keyExpr("$"+strconv.Itoa(from+i), i)
	}
	return strings.Join(parts, ", ")
}

func all(int) bool { return true }

func params(from, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(parts, ", ")
}

func maskKey(prefix string, m []bool) string {
	b := []byte(prefix)
	for _, v := range m {
		if v {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	return string(b)
}

// conflictClause is the ON CONFLICT tail updating the set columns; onlyChanged
// adds a guard so that rows already identical are not rewritten.
func (ts *tableSQL) conflictClause(set []bool, onlyChanged bool) string {
	var sets []string
	for i, c := range ts.cols {
		if set[i] {
			sets = append(sets, c+" = EXCLUDED."+c)
		}
	}
	for i, k := range ts.key {
		// A key the source's collation folds takes the row's spelling.
		if ts.keyFn[i] != "" && !set[k] {
			sets = append(sets, ts.cols[k]+" = EXCLUDED."+ts.cols[k])
		}
	}
	tail := " ON CONFLICT (" + ts.keyElements() + ") DO "
	if len(sets) == 0 {
		return tail + "NOTHING"
	}
	tail += "UPDATE SET " + strings.Join(sets, ", ")
	if onlyChanged {
		// *<> compares binary images: it works for types without an equality
		// operator (json) and sees 1.0 -> 1.00 as a change, unlike =.
		tail += " WHERE d.* *<> EXCLUDED.*"
	}
	return tail
}

// upsertSQL inserts the ins columns ($1.. in column order) and on conflict
// updates the set columns.
func (ts *tableSQL) upsertSQL(ins, set []bool) string {
	return ts.memo.Get(maskKey("upsert", ins)+maskKey("/", set), func() string {
		n := 0
		for _, v := range ins {
			if v {
				n++
			}
		}
		return "INSERT INTO " + ts.name + " AS d (" + ts.list("", func(i int) bool { return ins[i] }) +
			") VALUES (" + params(1, n) + ")" + ts.conflictClause(set, false)
	})
}

// updateElseInsertSQL writes a row some of whose columns the change left
// Unchanged without proposing them to an INSERT: PostgreSQL checks NOT
// NULL on an INSERT's proposed row before ON CONFLICT, so an upsert that
// leaves out a column a user made NOT NULL fails even when the row exists.
// The ins columns ($1.. in column order, the key among them) update the
// set columns of the row with the key; only when there is none are they
// inserted, the others taking their defaults.
func (ts *tableSQL) updateElseInsertSQL(ins, set []bool) string {
	return ts.memo.Get(maskKey("update-else-insert", ins)+maskKey("/", set), func() string {
		param := make([]string, len(ts.cols)) // each inserted column's $n
		var vals []string
		for i, in := range ins {
			if in {
				param[i] = "$" + strconv.Itoa(len(vals)+1)
				vals = append(vals, param[i])
			}
		}
		var sets []string
		for i, c := range ts.cols {
			if set[i] {
				sets = append(sets, c+" = "+param[i])
			}
		}
		for i, k := range ts.key {
			if ts.keyFn[i] != "" && !set[k] {
				sets = append(sets, ts.cols[k]+" = "+param[k]) // the row's spelling, as conflictClause
			}
		}
		where := " WHERE " + ts.keyMatchOf("", func(i int) string { return param[ts.key[i]] })
		found := "SELECT 1 FROM " + ts.name + where
		if len(sets) > 0 {
			found = "UPDATE " + ts.name + " SET " + strings.Join(sets, ", ") + where + " RETURNING 1"
		}
		return "WITH found AS (" + found + ") INSERT INTO " + ts.name + " AS d (" + ts.list("", func(i int) bool { return ins[i] }) +
			") SELECT " + strings.Join(vals, ", ") + " WHERE NOT EXISTS (SELECT 1 FROM found)" + ts.conflictClause(set, false)
	})
}

// updateSQL sets the set columns ($1.. in column order) of the row whose
// key follows them.
func (ts *tableSQL) updateSQL(set []bool) string {
	return ts.memo.Get(maskKey("update", set), func() string {
		var sets []string
		n := 0
		for i, c := range ts.cols {
			if set[i] {
				n++
				sets = append(sets, c+" = $"+strconv.Itoa(n))
			}
		}
		return "UPDATE " + ts.name + " SET " + strings.Join(sets, ", ") + " WHERE " + ts.keyMatch("", n+1)
	})
}

// keyMatch is `alias.k1 = $from AND …` over the key columns.
func (ts *tableSQL) keyMatch(alias string, from int) string {
	return ts.keyMatchOf(alias, func(i int) string { return "$" + strconv.Itoa(from+i) })
}

// keyMatchOf is keyMatch with key column i's parameter named by param.
func (ts *tableSQL) keyMatchOf(alias string, param func(i int) string) string {
	parts := make([]string, len(ts.key))
	for i, k := range ts.key {
		parts[i] = ts.keyExpr(alias+ts.cols[k], i) + " = " + ts.keyExpr(param(i), i)
	}
	return strings.Join(parts, " AND ")
}

func (ts *tableSQL) deleteSQL() string {
	return ts.memo.Get("delete", func() string {
		return "DELETE FROM " + ts.name + " WHERE " + ts.keyMatch("", 1)
	})
}

// deleteReturningSQL deletes a row by key and returns the ret columns.
func (ts *tableSQL) deleteReturningSQL(ret []bool) string {
	return ts.memo.Get(maskKey("delret", ret), func() string {
		return "DELETE FROM " + ts.name + " WHERE " + ts.keyMatch("", 1) +
			" RETURNING " + ts.list("", func(i int) bool { return ret[i] })
	})
}

// selectByKeySQL reads the cols of the row with a key.
func (ts *tableSQL) selectByKeySQL(cols []int) string {
	return ts.memo.Get(fmt.Sprint("selkey", cols), func() string {
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = ts.cols[c]
		}
		return "SELECT " + strings.Join(names, ", ") + " FROM " + ts.name + " WHERE " + ts.keyMatch("", 1)
	})
}

func (ts *tableSQL) truncateSQL() string {
	// DELETE rather than TRUNCATE: transactional like the rest of the batch
	// and without TRUNCATE's ACCESS EXCLUSIVE lock.
	return "DELETE FROM " + ts.name
}

// rangeCond restricts alias's key to (low, high] with row-value comparisons
// whose parameters start at $1, low first.
func (ts *tableSQL) rangeCond(alias string, low, high bool) string {
	k := "(" + ts.keyList(alias) + ")"
	var conds []string
	next := 1
	if low {
		conds = append(conds, k+" > ("+ts.keyParams(next)+")")
		next += len(ts.key)
	}
	if high {
		conds = append(conds, k+" <= ("+ts.keyParams(next)+")")
	}
	if len(conds) == 0 {
		return "TRUE"
	}
	return strings.Join(conds, " AND ")
}

// selectKeysSQL reads the rows whose key is one of n keys, parameters in
// key column order, key after key.
func (ts *tableSQL) selectKeysSQL(n int) string {
	tuples := make([]string, n)
	for i := range tuples {
		tuples[i] = "(" + ts.keyParams(1+i*len(ts.key)) + ")"
	}
	return "SELECT " + ts.list("", all) + " FROM " + ts.name + " AS d WHERE (" + ts.keyList("d.") + ") IN (" +
		strings.Join(tuples, ", ") + ")"
}

func (ts *tableSQL) selectRangeSQL(low, high bool) string {
	return ts.memo.Get(maskKey("select", []bool{low, high}), func() string {
		return "SELECT " + ts.list("", all) + " FROM " + ts.name + " AS d WHERE " +
			ts.rangeCond("d.", low, high) + " ORDER BY " + ts.keyList("d.")
	})
}

// sumRangeSQL counts and checksums the rows of a range (pgsum), its
// columns typed as the source's (t).
func (ts *tableSQL) sumRangeSQL(t *change.Table, low, high bool) string {
	return ts.memo.Get(maskKey("sum", []bool{low, high}), func() string {
		cols := make([]pgsum.Column, len(ts.cols))
		for i, c := range ts.cols {
			cols[i] = pgsum.Column{Ref: "d." + c, BaseOID: t.Columns[i].BaseOID}
		}
		return pgsum.Query(cols, "FROM "+ts.name+" AS d WHERE "+ts.rangeCond("d.", low, high))
	})
}

// chunkDeleteSQL deletes the rows of the range whose key is not staged
// (all of them when nothing is).
func (ts *tableSQL) chunkDeleteSQL(low, high, staged bool) string {
	return ts.memo.Get(maskKey("chunkdel", []bool{low, high, staged}), func() string {
		sql := "DELETE FROM " + ts.name + " AS d WHERE " + ts.rangeCond("d.", low, high)
		if !staged {
			return sql
		}
		match := make([]string, len(ts.key))
		for i, k := range ts.key {
			match[i] = ts.keyExpr("c."+ts.cols[k], i) + " = " + ts.keyExpr("d."+ts.cols[k], i)
		}
		return sql + " AND NOT EXISTS (SELECT 1 FROM " + ts.tmp + " AS c WHERE " + strings.Join(match, " AND ") + ")"
	})
}

// chunkUpsertSQL upserts every row of tmp, skipping rows already identical.
func (ts *tableSQL) chunkUpsertSQL() string {
	return ts.memo.Get("chunkupsert", func() string {
		cols := ts.list("", all)
		set := make([]bool, len(ts.cols))
		for i := range set {
			set[i] = !ts.isKey[i]
		}
		return "INSERT INTO " + ts.name + " AS d (" + cols + ") SELECT " + cols + " FROM " + ts.tmp +
			ts.conflictClause(set, true)
	})
}

func (ts *tableSQL) tmpDeleteSQL() string {
	return ts.memo.Get("tmpdel", func() string {
		return "DELETE FROM " + ts.tmp + " WHERE " + ts.keyMatch("", 1)
	})
}

// copySQL copies all columns into into (the table or its staging table).
func (ts *tableSQL) copySQL(into string) string {
	return ts.memo.Get("copy"+into, func() string {
		return "COPY " + into + " (" + ts.list("", all) + ") FROM STDIN"
	})
}

// probeSQL finds whether the range holds any row.
func (ts *tableSQL) probeSQL(low, high bool) string {
	return ts.memo.Get(maskKey("probe", []bool{low, high}), func() string {
		return "SELECT 1 FROM " + ts.name + " AS d WHERE " + ts.rangeCond("d.", low, high) + " LIMIT 1"
	})
}
