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

// The base types hashed by their values rather than their text.
const (
	int8OID        = 20
	int2OID        = 21
	int4OID        = 23
	bpcharOID      = 1042
	timestampOID   = 1114
	timestamptzOID = 1184
	uuidOID        = 2950
)

// Select is the select list of a range's count and checksum over cols, in
// table order, both as text.
//
// Each value is hashed to 64 bits, seeded by its column's place so that
// values swapped between columns differ; a NULL hashes to that place. A
// row's hashes are XORed and mixed again, so that values swapped between
// rows differ too, and the rows' hashes are added, exactly (numeric): the
// sum does not depend on the rows' order and two equal rows do not cancel.
//
// A value is hashed as its text (compared byte by byte, COLLATE "C", so
// that a case-insensitive column still tells "a" from "A"; a
// character(n) value as its output prints it, blanks and all), except
// where the text says nothing the value does not and printing it is most
// of the cost: integers (as int8, so that an int4 column still matches an
// int8 one), timestamps (a timestamptz at UTC, whatever the session's time
// zone) and uuids are hashed by the type's own hash of the value. (Not
// numeric, float or jsonb: their hashes call 1.0 and 1.00, or 0 and -0,
// equal.) A destination column of another type than the source's then
// fails its sum, or differs, and the range is compared row by row.
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
		parts[i] = "coalesce(" + valueHash(c, seed) + ", " + seed + ")"
		if c.BaseOID == bpcharOID {
			// concat prints NULL as '': tell it apart. (Not for every
			// column: a composite value of NULL fields IS NULL too.)
			parts[i] = "CASE WHEN " + c.Ref + " IS NULL THEN " + seed + " ELSE " + valueHash(c, seed) + " END"
		}
	}
	return "pg_catalog.count(*)::pg_catalog.text, coalesce(pg_catalog.sum(pg_catalog.hashint8extended(" +
		strings.Join(parts, " OPERATOR(pg_catalog.#) ") + ", 0::pg_catalog.int8)), 0)::pg_catalog.text"
}

// valueHash is the hash of column c's value with seed, NULL for a NULL
// value (but a character(n) one's).
func valueHash(c Column, seed string) string {
	switch c.BaseOID {
	case int2OID, int4OID, int8OID:
		return "pg_catalog.hashint8extended((" + c.Ref + ")::pg_catalog.int8, " + seed + ")"
	case timestampOID:
		return "pg_catalog.timestamp_hash_extended(" + c.Ref + ", " + seed + ")"
	case timestamptzOID:
		return "pg_catalog.timestamp_hash_extended(pg_catalog.timezone('UTC'::pg_catalog.text, " + c.Ref + "), " + seed + ")"
	case uuidOID:
		return "pg_catalog.uuid_hash_extended(" + c.Ref + ", " + seed + ")"
	case bpcharOID:
		return textHash("pg_catalog.concat("+c.Ref+")", seed)
	}
	return textHash("("+c.Ref+")::pg_catalog.text", seed)
}

func textHash(text, seed string) string {
	return "pg_catalog.hashtextextended(" + text + " COLLATE pg_catalog.\"C\", " + seed + ")"
}
