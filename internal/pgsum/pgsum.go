// Package pgsum is the range checksum a PostgreSQL source and a PostgreSQL
// destination both compute, so that verify can compare a key range without
// either server sending its rows.
package pgsum

import (
	"strconv"
	"strings"
)

// Kind names the checksum: a source and a destination compare sums only
// when their kinds are equal.
const Kind = "postgres-text-v1"

// Column is one column of a summed range: its quoted name (or qualified
// reference) and whether its type is blank-padded character(n), whose cast
// to text drops the trailing blanks its output keeps.
type Column struct {
	Ref    string
	Padded bool
}

// Select is the select list of a range's count and checksum over cols, in
// table order, both as text.
//
// Each value is hashed to 64 bits as text (its cast to text; a character(n)
// value as its output prints it, blanks and all), compared byte by byte
// (COLLATE "C", so that a case-insensitive column still tells "a" from
// "A"), seeded by its column's place so that values swapped between
// columns differ; a NULL hashes to that place. A row's hashes are XORed and
// mixed again, so that values swapped between rows differ too, and the
// rows' hashes are added, exactly (numeric): the sum does not depend on the
// rows' order and two equal rows do not cancel. Hashing each value apart
// costs the server about half what hashing the row's text (ROW(...)::text)
// does.
//
// Every function, operator, type and collation is named in pg_catalog,
// with arguments of the built-ins' exact types, so that nothing a user
// creates (a public.hashtextextended(text, integer), say) is chosen over
// them: it would run as tidemark's role, and a constant one on both
// servers would make every range match.
func Select(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		seed := strconv.Itoa(i+1) + "::pg_catalog.int8"
		hash := func(text string) string {
			return "pg_catalog.hashtextextended(" + text + " COLLATE pg_catalog.\"C\", " + seed + ")"
		}
		if c.Padded {
			// concat prints NULL as '': tell it apart. (Not for every
			// column: a composite value of NULL fields IS NULL too.)
			parts[i] = "CASE WHEN " + c.Ref + " IS NULL THEN " + seed + " ELSE " + hash("pg_catalog.concat("+c.Ref+")") + " END"
			continue
		}
		parts[i] = "coalesce(" + hash("("+c.Ref+")::pg_catalog.text") + ", " + seed + ")"
	}
	return "pg_catalog.count(*)::pg_catalog.text, coalesce(pg_catalog.sum(pg_catalog.hashint8extended(" +
		strings.Join(parts, " OPERATOR(pg_catalog.#) ") + ", 0::pg_catalog.int8)), 0)::pg_catalog.text"
}

// Padded reports whether a column of base type oid is character(n).
func Padded(baseOID uint32) bool { return baseOID == bpcharOID }

const bpcharOID = 1042
