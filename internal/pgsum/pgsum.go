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
const Kind = "postgres-v2"

// Column is one column of a summed range: its quoted name (or qualified
// reference) and its base type (a domain's type underneath), as the
// source describes it, which chooses how its values are hashed.
type Column struct {
	Ref     string
	BaseOID uint32
}

// The base types hashed other than by their text.
const (
	int8OID   = 20
	int2OID   = 21
	int4OID   = 23
	bpcharOID = 1042
	uuidOID   = 2950
)

// Query is the query of a range's count and checksum over cols, in table
// order, both as text; from is the rest of the row query ("FROM … WHERE
// …") the columns' references are valid in.
//
// Each value is hashed to 64 bits, seeded by its column's place so that
// values swapped between columns differ; a NULL hashes to that place. A
// row's hashes are XORed and mixed again (int64Hash), so that values
// swapped between rows differ too, and the rows' hashes are added, exactly
// (numeric): the sum does not depend on the rows' order and two equal rows
// do not cancel.
//
// A value is hashed as its text (compared byte by byte, COLLATE "C", so
// that a case-insensitive column still tells "a" from "A"; a
// character(n) value as its output prints it, blanks and all), except
// where the text says nothing the value does not and printing it costs
// more than hashing: integers (as int8, so that an int4 column still
// matches an int8 one) and uuids are hashed by value. (Not numeric, float
// or jsonb: their types' hashes call 1.0 and 1.00, or 0 and -0, equal; not
// timestamps, whose hashes fold their 64 bits to 32.) A destination column
// of another type than the source's then fails its sum, or differs, and
// the range is compared row by row.
//
// Every function, operator, type and collation is named in pg_catalog,
// with arguments of the built-ins' exact types, so that nothing a user
// creates (a public.hashtextextended(text, integer), say) is chosen over
// them: it would run as tidemark's role, and a constant one on both
// servers would make every range match.
func Query(cols []Column, from string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		seed := strconv.Itoa(i+1) + "::pg_catalog.int8"
		if c.BaseOID == bpcharOID {
			// concat prints NULL as '': tell it apart. (Not for every
			// column: a composite value of NULL fields IS NULL too.)
			parts[i] = "CASE WHEN " + c.Ref + " IS NULL THEN " + seed + " ELSE " + valueHash(c, seed) + " END"
		} else {
			parts[i] = "coalesce(" + valueHash(c, seed) + ", " + seed + ")"
		}
	}
	// The row's XOR is taken once, in a subquery the planner keeps
	// (OFFSET 0), and mixed outside it: int64Hash names it twice.
	return "SELECT pg_catalog.count(*)::pg_catalog.text, coalesce(pg_catalog.sum(" + int64Hash("r.x", "0::pg_catalog.int8") +
		"), 0)::pg_catalog.text FROM (SELECT " + strings.Join(parts, " OPERATOR(pg_catalog.#) ") + " AS x " + from + " OFFSET 0) AS r"
}

// valueHash is the hash of column c's value with seed, NULL for a NULL
// value (but a character(n) one's).
func valueHash(c Column, seed string) string {
	switch c.BaseOID {
	case int2OID, int4OID, int8OID:
		// No cast: a column of another type (numeric, text) fails the
		// sum rather than be rounded or parsed into a match.
		return int64Hash(c.Ref, seed)
	case uuidOID:
		return "pg_catalog.uuid_hash_extended(" + c.Ref + ", " + seed + ")"
	case bpcharOID:
		return textHash("pg_catalog.concat("+c.Ref+")", seed)
	}
	return textHash("("+c.Ref+")::pg_catalog.text", seed)
}

// int64Hash hashes an int8 expression x to 64 bits. hashint8extended
// alone folds x's two halves into 32 bits first (-1 and 4294967295 hash
// alike); the high half is hashed too, seeded by the hash of the folded
// value, which tells every two values apart but by chance. (Chained, not
// XORed: an XOR of the two would be symmetric, 1 and 4294967297 alike,
// and 0 for 0 and -1.) x is evaluated twice.
func int64Hash(x, seed string) string {
	return "pg_catalog.hashint8extended(pg_catalog.int8shr(" + x + ", 32), pg_catalog.hashint8extended(" + x + ", " + seed + "))"
}

func textHash(text, seed string) string {
	return "pg_catalog.hashtextextended(" + text + " COLLATE pg_catalog.\"C\", " + seed + ")"
}
