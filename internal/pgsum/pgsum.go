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

// Select is the select list of a range's count and checksum over the
// quoted columns cols, in table order, both as text.
//
// Each value is hashed to 64 bits as text (its cast to text, compared
// byte by byte: COLLATE "C", so that a case-insensitive column still tells
// "a" from "A"), seeded by its column's place so that values swapped
// between columns differ; a NULL hashes to that place. A row's hashes are
// XORed and mixed again, so that values swapped between rows differ too,
// and the rows' hashes are added, exactly (numeric): the sum does not
// depend on the rows' order and two equal rows do not cancel. Hashing each
// value apart costs the server about half what hashing the row's text
// (ROW(...)::text) does.
func Select(cols []string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		seed := strconv.Itoa(i + 1)
		parts[i] = "coalesce(hashtextextended((" + c + ")::text COLLATE \"C\", " + seed + "), " + seed + ")"
	}
	return "count(*)::text, coalesce(sum(hashint8extended(" + strings.Join(parts, " # ") + ", 0)), 0)::text"
}
