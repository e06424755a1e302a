package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/tidemark/tidemark/internal/collate"
)

// A UCA collation (MariaDB's utf8mb4_unicode_ci, utf8mb4_uca1400_ai_ci)
// weighs a character nothing, one weight or several, and some sequences of
// characters together, which translate() cannot express. Its sort key is
// the text's weights, each written as one character (weightChar), read
// from two tables in schema _tidemark made from package collate's tables:
// the runs of code points (every code point falls in one: the run that
// starts last at or before it) and the contractions, which a regular
// expression matches first (PostgreSQL's alternation takes the longest
// match, as the source does). The tables never change once written, so the
// function is immutable as an index expression needs, although it reads
// them.

// ucaTables are the qualified, quoted names of a UCA collation's tables.
func ucaTables(collation string) (runs, contractions string) {
	return quote("_tidemark") + "." + quote("ucaruns_"+collation), quote("_tidemark") + "." + quote("ucacontr_"+collation)
}

// weightChar is the character a weight becomes in a sort key: the weight's
// code point, or beyond the surrogates for the weights among them, so that
// "C" order of the characters is the weights' order.
func weightChar(w uint16) rune {
	if w >= 0xD800 {
		return rune(w) + 0x800
	}
	return rune(w)
}

func weightText(ws []uint16) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteRune(weightChar(w))
	}
	return b.String()
}

// ucaRunRows are the rows of the runs table: (lo, step, pre, last), where
// a code point cp of the run weighs pre followed by the character
// last + step*(cp-lo), or pre alone when last is NULL. A run whose last
// weight counts across the surrogates is split there.
func ucaRunRows(c *collate.Collation) [][]any {
	var rows [][]any
	for _, r := range c.Runs() {
		if len(r.W) == 0 {
			rows = append(rows, []any{int32(r.Lo), int32(0), "", nil})
			continue
		}
		pre, last := weightText(r.W[:len(r.W)-1]), r.W[len(r.W)-1]
		step := int32(0)
		if r.Step {
			step = 1
		}
		rows = append(rows, []any{int32(r.Lo), step, pre, int32(weightChar(last))})
		if r.Step && last < 0xD800 && int(last)+int(r.Hi-r.Lo) >= 0xD800 {
			split := r.Lo + rune(0xD800-int(last))
			rows = append(rows, []any{int32(split), step, pre, int32(weightChar(0xD800))})
		}
	}
	return rows
}

// ucaContractionPattern is a regular expression (as a U& literal) that
// matches a contraction, longest first, or else one character; heads is a
// bracket expression of the characters contractions start with, "" when
// there are none.
func ucaContractionPattern(c *collate.Collation) (pattern, heads string) {
	seqs := make([]string, 0, len(c.Contractions()))
	for s := range c.Contractions() {
		seqs = append(seqs, s)
	}
	sort.Strings(seqs)
	var b, h strings.Builder
	seen := map[rune]bool{}
	b.WriteString("U&'")
	for _, s := range seqs {
		b.WriteString("(?:")
		for i, r := range s {
			b.WriteString(regexpChar(r))
			if i == 0 && !seen[r] {
				seen[r] = true
				h.WriteString(regexpChar(r))
			}
		}
		b.WriteString(")|")
	}
	b.WriteString(".'")
	if h.Len() == 0 {
		return b.String(), ""
	}
	return b.String(), "U&'[" + h.String() + "]'"
}

// regexpChar spells a character for a regular expression inside U&”.
func regexpChar(r rune) string {
	esc := ""
	if r < 0x80 && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
		esc = `\\` // a regular expression escape, in U&'' spelling
	}
	return esc + fmt.Sprintf(`\+%06X`, r)
}

// ucaASCII returns translate()'s arguments that weigh ASCII text (no
// contraction is made of ASCII characters alone): each character to its
// weight's character, the ignorable ones (listed last, with no
// counterpart) deleted; ok is false when an ASCII character weighs more
// than one weight.
func ucaASCII(c *collate.Collation) (from, to string, ok bool) {
	var f, t, ignorable strings.Builder
	for r := rune(1); r < 0x80; r++ {
		switch w := c.Weights(string(r)); len(w) {
		case 0:
			fmt.Fprintf(&ignorable, `\%04X`, r)
		case 1:
			fmt.Fprintf(&f, `\%04X`, r)
			fmt.Fprintf(&t, `\%04X`, weightChar(w[0]))
		default:
			return "", "", false
		}
	}
	return "U&'" + f.String() + ignorable.String() + "'", "U&'" + t.String() + "'", true
}

// ucaSortKeyBody is the function's SQL expression over $1: the weights
// (ASCII text through translate(); the long pattern only for text that
// may hold a contraction); under PAD SPACE, rewritten as sortKeyBody
// rewrites spaces, the space's weight standing for the space and weights
// below it for characters below the space.
func ucaSortKeyBody(c *collate.Collation) string {
	runs, contr := ucaTables(c.Name)
	cp := "ascii(t.m[1])"
	pattern, heads := ucaContractionPattern(c)
	if heads != "" {
		pattern = "CASE WHEN $1 ~ " + heads + " THEN " + pattern + " ELSE '.' END"
	}
	weights := `(SELECT coalesce(string_agg(CASE WHEN length(t.m[1]) > 1 THEN (SELECT c.w FROM ` + contr + ` c WHERE c.seq = t.m[1])
		ELSE (SELECT r.pre || coalesce(chr(r.last + r.step * (` + cp + ` - r.lo)), '') FROM ` + runs + ` r WHERE r.lo <= ` + cp + ` ORDER BY r.lo DESC LIMIT 1) END,
		'' ORDER BY t.o), '')
		FROM regexp_matches($1, ` + pattern + `, 'g') WITH ORDINALITY AS t(m, o))`
	if from, to, ok := ucaASCII(c); ok {
		weights = `(CASE WHEN $1 ~ U&'^[\0001-\007F]*$' THEN translate($1, ` + from + `, ` + to + `) ELSE ` + weights + ` END)`
	}
	if !c.PadSpace() {
		return weights
	}
	sp := fmt.Sprintf(`\%04X`, weightChar(c.SpaceWeight()))
	below := fmt.Sprintf(`\%04X`, weightChar(c.SpaceWeight())-1)
	spaced := `regexp_replace(x.w, U&'` + sp + `+$', '')`
	spaced = `regexp_replace(` + spaced + `, U&'` + sp + `(?=` + sp + `*[\0001-` + below + `])', U&'` + sp + `\0001', 'g')`
	spaced = `regexp_replace(` + spaced + `, U&'` + sp + `(?!\0001)', U&'` + sp + `\0003', 'g')`
	return `(SELECT (CASE WHEN strpos(x.w, U&'` + sp + `') = 0 THEN x.w ELSE ` + spaced + ` END) || U&'` + sp + `\0002' FROM (SELECT ` + weights + ` AS w) x)`
}

// createUCASortKey creates a UCA collation's tables and sort key function
// in one transaction, under a lock that makes another sink doing the same
// wait and then find the function.
func (s *Sink) createUCASortKey(ctx context.Context, c *collate.Collation) error {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('tidemark sort keys', 0))"); err != nil {
		return err
	}
	name := sortKeyFunc(c.Name)
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", name+"(text)").Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	runs, contr := ucaTables(c.Name)
	for _, ddl := range []string{
		"DROP TABLE IF EXISTS " + runs + ", " + contr,
		"CREATE TABLE " + runs + ` ("lo" integer PRIMARY KEY, "step" integer NOT NULL, "pre" text COLLATE "C" NOT NULL, "last" integer)`,
		"CREATE TABLE " + contr + ` ("seq" text COLLATE "C" PRIMARY KEY, "w" text COLLATE "C" NOT NULL)`,
	} {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return err
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"_tidemark", "ucaruns_" + c.Name}, []string{"lo", "step", "pre", "last"}, pgx.CopyFromRows(ucaRunRows(c))); err != nil {
		return fmt.Errorf("fill the weights: %w", err)
	}
	var rows [][]any
	for seq, ws := range c.Contractions() {
		rows = append(rows, []any{seq, weightText(ws)})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"_tidemark", "ucacontr_" + c.Name}, []string{"seq", "w"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("fill the contractions: %w", err)
	}
	if _, err := tx.Exec(ctx, "CREATE FUNCTION "+name+"(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN "+ucaSortKeyBody(c)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
