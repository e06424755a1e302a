package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// keys describes every included table the way the stream does (Describe
// with the configured key columns). A table without a usable key is left
// out of the stream, its object failing: a warning. Any other error stops
// the stream as a whole: a failure.
func (src *sourceCheck) keys(ctx context.Context) Check {
	name := src.name("table keys")
	if src.tables == nil {
		return fail(name, "not checked: the tables could not be listed", "")
	}
	var keyless, fixes, broken []string
	for i := range src.tables {
		t := &src.tables[i]
		tctx, cancel := context.WithTimeout(ctx, Timeout)
		described, err := Describe(tctx, src.conn, t.id, src.s.Keys[t.id])
		if err == nil {
			src.published = append(src.published, *t)
			src.described = append(src.described, described)
		} else if errors.Is(err, ErrGeneratedKey) {
			keyless = append(keyless, t.id.String())
			fixes = append(fixes, errText(err))
			src.generatedKeys = append(src.generatedKeys, t.id.String())
		} else if errors.Is(err, ErrNoKey) {
			keyless = append(keyless, t.id.String())
			fixes = append(fixes, src.keyFix(tctx, t))
		} else if err != nil {
			broken = append(broken, errText(err))
		}
		cancel()
		if src.conn.IsClosed() {
			return fail(name, "the connection was lost while reading table keys: "+list(broken, 3), "")
		}
	}
	switch {
	case len(broken) > 0:
		return fail(name, fmt.Sprintf("%d %s cannot be described, which stops the stream: %s",
			len(broken), plural(len(broken), "table", "tables"), list(broken, 3)),
			fmt.Sprintf("correct the key columns under %s.keys, or the tables", src.key))
	case len(keyless) > 0:
		return warn(name, fmt.Sprintf("%d of %d tables have no usable row key and will not be replicated (their objects fail): %s",
			len(keyless), len(src.tables), list(keyless, 10)), strings.Join(fixes, "\n"))
	}
	return ok(name, fmt.Sprintf("all %d included %s a usable row key", len(src.tables), plural(len(src.tables), "table has", "tables have")))
}

// keyFix says how to give a keyless table a key: the replica identity on a
// unique index that qualifies for it, or a primary key, or configured key
// columns with REPLICA IDENTITY FULL.
func (src *sourceCheck) keyFix(ctx context.Context, t *tableInfo) string {
	tbl := table(t.id)
	if len(src.s.Keys[t.id]) > 0 {
		// The configured key is not covered by the replica identity.
		return fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL;  -- or USING INDEX on a unique index of the configured key", tbl)
	}
	var index string
	err := src.conn.QueryRow(ctx, `
		SELECT ci.relname::text
		FROM pg_index i
		JOIN pg_class ci ON ci.oid = i.indexrelid
		JOIN pg_class c ON c.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2
		  AND i.indisunique AND i.indimmediate AND i.indisvalid
		  AND i.indpred IS NULL AND i.indexprs IS NULL
		  AND NOT EXISTS (SELECT 1 FROM pg_attribute a
		                  WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey) AND NOT a.attnotnull)
		ORDER BY i.indnatts, ci.relname LIMIT 1`, t.id.Schema, t.id.Name).Scan(&index)
	if err == nil {
		return fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s;", tbl, ident(index))
	}
	return fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (…);  -- or name the key columns under %s.keys (%s: [col, …]) and run ALTER TABLE %s REPLICA IDENTITY FULL;",
		tbl, src.key, t.id, tbl)
}
