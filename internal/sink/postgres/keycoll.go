package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/collate"
)

// A text key under another source's folding collation (MariaDB's
// utf8mb4_general_ci, latin1_swedish_ci, utf8mb4_uca1400_ai_ci: see package
// collate) has no
// PostgreSQL collation of the same equality and order: ICU's differ in
// where punctuation sorts, in ß, and in trailing spaces. Such a key is
// compared through a sort key instead: a SQL function in schema _tidemark,
// one per source collation, turns the text into a text whose "C" order is
// the source's order and whose equality is the source's. A unique index on
// it makes keys the source calls equal one row, and every key comparison
// the sink writes (upsert target, deletes, chunk ranges, verify's reads)
// goes through it. The column itself keeps the source's spelling.

// sortKeyFunc is the qualified, quoted name of the sort key function of a
// source collation.
func sortKeyFunc(collation string) string {
	return quote("_tidemark") + "." + quote("sortkey_"+collation)
}

// sortKeyCollation returns the source collation of a key column compared
// through a sort key, or nil.
func sortKeyCollation(c change.Column) *collate.Collation {
	if c.Native == "" || change.TagOf(c) != change.TagText {
		return nil
	}
	return collate.Lookup(c.Collation)
}

// sortKeyBody is the function's SQL expression over $1. The source
// compares weight by weight, the shorter string padded with spaces (a NO
// PAD collation stops after step 1):
//  1. each character becomes the character of its weight (translate);
//  2. trailing spaces go (padding adds them back);
//  3. every other space becomes two characters that say whether the run
//     of spaces it is in ends on a weight below the space (" \x01": those
//     first) or above it (" \x03": every space not yet followed by \x01),
//     and the end of the text becomes " \x02", so that "C" order compares
//     the end as padding would: below a space run that ends above the
//     space, above one that ends below it (such as "a\t" < "a" < "a b").
//
// translate looks each character up in its list one by one, so ASCII text
// (most keys) is translated with the ASCII part of the list alone, and the
// spaces are rewritten only when there is one (only the space weighs the
// space: the generator checks).
func sortKeyBody(c *collate.Collation) string {
	var from, to, asciiFrom, asciiTo strings.Builder
	for _, p := range c.Mapped() {
		from.WriteString(fmt.Sprintf(`\%04X`, p[0]))
		to.WriteString(fmt.Sprintf(`\%04X`, p[1]))
		if p[0] < 0x80 {
			asciiFrom.WriteString(fmt.Sprintf(`\%04X`, p[0]))
			asciiTo.WriteString(fmt.Sprintf(`\%04X`, p[1]))
		}
	}
	text := "$1"
	if w := c.Supplementary(); w != 0 {
		text = fmt.Sprintf(`regexp_replace(%s, U&'[\+010000-\+10FFFF]', U&'\%04X', 'g')`, text, w)
	}
	w := fmt.Sprintf(`(CASE WHEN $1 ~ U&'^[\0001-\007F]*$' THEN translate($1, U&'%s', U&'%s') ELSE translate(%s, U&'%s', U&'%s') END)`,
		asciiFrom.String(), asciiTo.String(), text, from.String(), to.String())
	if !c.PadSpace() {
		return w // NO PAD: a prefix sorts first, as in "C"
	}
	spaced := `regexp_replace(` + w + `, ' +$', '')`
	spaced = `regexp_replace(` + spaced + `, U&' (?= *[\0001-\001F])', U&' \0001', 'g')`
	spaced = `regexp_replace(` + spaced + `, U&' (?!\0001)', U&' \0003', 'g')`
	return `(CASE WHEN strpos($1, ' ') = 0 THEN ` + w + ` ELSE ` + spaced + ` END) || U&' \0002'`
}

// ensureSortKeys creates the sort key functions t's key needs, unless they
// exist. The function bodies are tidemark's own constants, not values.
func (s *Sink) ensureSortKeys(ctx context.Context, t *change.Table) error {
	for _, c := range t.KeyColumns() {
		coll := sortKeyCollation(c)
		if coll == nil {
			continue
		}
		name := sortKeyFunc(coll.Name)
		var ok bool
		if err := s.conn.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", name+"(text)").Scan(&ok); err != nil {
			return fmt.Errorf("look up %s: %w", name, err)
		}
		if ok {
			continue
		}
		if coll.Expands() {
			if err := s.createUCASortKey(ctx, coll); err != nil {
				return fmt.Errorf("create the sort key function of collation %s: %w", coll.Name, err)
			}
			continue
		}
		ddl := "CREATE FUNCTION " + name + "(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN " + sortKeyBody(coll)
		_, err := s.conn.Exec(ctx, ddl)
		if madeMeanwhile(err, "42723") {
			continue // another sink created it meanwhile
		}
		if err != nil {
			return fmt.Errorf("create the sort key function of collation %s: %w", coll.Name, err)
		}
	}
	return nil
}

// sortKeyIndexName is the name of the unique index over the key's sort
// keys, in the table's schema.
func (ts *tableSQL) sortKeyIndexName() string {
	h := sha256.Sum256([]byte(ts.id.Schema + "\x00" + ts.id.Name))
	return "_tidemark_key_" + hex.EncodeToString(h[:12])
}

// createSortKeyIndex creates the unique index over the key's sort keys,
// unless no key column needs one or it exists.
func (s *Sink) createSortKeyIndex(ctx context.Context, ts *tableSQL) error {
	if !ts.sortKeys {
		return nil
	}
	ddl := "CREATE UNIQUE INDEX IF NOT EXISTS " + quote(ts.sortKeyIndexName()) + " ON " + ts.name + " (" + ts.keyElements() + ")"
	_, err := s.conn.Exec(ctx, ddl)
	var pgErr *pgconn.PgError
	switch {
	case err == nil || madeMeanwhile(err, ""):
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		return fmt.Errorf("create the key's sort key index: %w (%s); the table holds rows whose keys the source's collation calls equal: keep one row of each such key, or drop the table for tidemark to create and backfill it", err, pgErr.Detail)
	default:
		return fmt.Errorf("create the key's sort key index: %w", err)
	}
}

// ensureSortKeyIndex gives a table that exists the sort key functions and
// index its key needs, when it lacks them. It looks first: CREATE INDEX IF
// NOT EXISTS would take a lock that waits for the table's writers.
func (s *Sink) ensureSortKeyIndex(ctx context.Context, t *change.Table, ts *tableSQL) error {
	if !ts.sortKeys {
		return nil
	}
	if ok, err := s.exists(ctx, quote(ts.id.Schema)+"."+quote(ts.sortKeyIndexName())); err != nil || ok {
		return err
	}
	if err := s.ensureSortKeys(ctx, t); err != nil {
		return err
	}
	return s.createSortKeyIndex(ctx, ts)
}

// keyElements lists the key as index elements: a sort key as an
// expression with the element's collation "C", which is how both the
// unique index and ON CONFLICT's inference of it spell it.
func (ts *tableSQL) keyElements() string {
	parts := make([]string, len(ts.key))
	for i, k := range ts.key {
		parts[i] = ts.cols[k]
		if ts.keyFn[i] != "" {
			parts[i] = "(" + ts.keyFn[i] + "(" + ts.cols[k] + ")) COLLATE \"C\""
		}
	}
	return strings.Join(parts, ", ")
}

// keyExpr is key column i (in key order) as the sink compares it: the
// column, or its sort key in "C".
func (ts *tableSQL) keyExpr(ref string, i int) string {
	if ts.keyFn[i] == "" {
		return ref
	}
	return "(" + ts.keyFn[i] + "(" + ref + ") COLLATE \"C\")"
}
