// Package change holds the types every source, sink and the merger share:
// log positions, tables, values, row changes and committed transactions.
//
// Each column carries a neutral type tag (Tag), and values travel as text
// in their tag's canonical form (Canonical), which each source's codec
// writes; sinks map them to their own storage by the tag (see
// docs/type-mapping.md). The canonical forms are PostgreSQL's output forms
// under the settings tidemark pins, so a PostgreSQL source's values cross
// the pipeline without a Go-side conversion.
package change

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// LSN is a position in the source's write-ahead log.
type LSN uint64

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// ParseLSN reads the "XXX/XXX" form PostgreSQL prints.
func ParseLSN(s string) (LSN, error) {
	var hi, lo uint32
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", s, err)
	}
	return LSN(uint64(hi)<<32 | uint64(lo)), nil
}

// TableID names a source table.
type TableID struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

func (t TableID) String() string { return t.Schema + "." + t.Name }

// ParseTableID splits "schema.table"; a name without a dot is in "public".
func ParseTableID(s string) TableID {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return TableID{Schema: s[:i], Name: s[i+1:]}
	}
	return TableID{Schema: "public", Name: s}
}

// Column describes one source column.
type Column struct {
	Name string `json:"name"`
	// Type is the column's type in PostgreSQL's notation, as format_type
	// prints it, e.g. "numeric(12,2)": a PostgreSQL source's own type, or
	// the PostgreSQL type another source's values are written as
	// (docs/type-mapping.md). TypeOID, BaseOID and TypeMod describe it.
	Type string `json:"type"`
	// Native is the source's own name of the type when the source is not
	// PostgreSQL (MySQL's COLUMN_TYPE, e.g. "bigint(20) unsigned"), for
	// people and for the source's own decoding; "" for PostgreSQL, whose
	// own name is Type.
	Native string `json:"native,omitempty"`
	// Tag is the neutral type: the canonical form the column's values
	// travel in (see Canonical), and what sinks choose their storage by.
	// Read it with TagOf, which fills it for columns described without one.
	Tag Tag `json:"tag,omitempty"`
	// TypeOID is the source type's oid; BaseOID is the oid of the domain's
	// base type (equal to TypeOID when the type is no domain).
	TypeOID uint32 `json:"type_oid"`
	BaseOID uint32 `json:"base_oid"`
	// Collation is the column's collation name, empty when not collatable.
	Collation string `json:"collation,omitempty"`
	// ByteOrder is set when the column's collation sorts text like its
	// bytes ("C", "POSIX", ucs_basic, or a C database default), so that
	// destinations comparing bytes agree with the source's ORDER BY.
	ByteOrder bool `json:"byte_order,omitempty"`
	NotNull   bool `json:"not_null"`
	// TypeMod is the type modifier as the catalog holds it (atttypmod: a
	// varchar's length, a numeric's precision and scale), -1 for none.
	TypeMod int32 `json:"type_mod,omitempty"`
	// Num is the column's attribute number on the source (attnum), which
	// survives a rename: schema changes are matched by it (see
	// docs/schema-changes.md). 0 when unknown.
	Num int16 `json:"num,omitempty"`
	// Generated is the expression of a stored generated column as the
	// source prints it (pg_get_expr), "" for any other column. The log
	// leaves such columns out of every change (see docs/type-mapping.md).
	Generated string `json:"generated,omitempty"`
}

// Table is a source table's shape as the pipeline needs it.
type Table struct {
	ID      TableID  `json:"id"`
	Columns []Column `json:"columns"`
	// Key lists the indexes into Columns of the row key, in key order.
	Key []int `json:"key"`
}

// KeyColumns returns the key columns in key order.
func (t *Table) KeyColumns() []Column {
	cols := make([]Column, len(t.Key))
	for i, k := range t.Key {
		cols[i] = t.Columns[k]
	}
	return cols
}

// ColumnIndex returns the index of the named column, or -1.
func (t *Table) ColumnIndex(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Value is one column value, as text in its column tag's canonical form.
type Value struct {
	Text string
	Null bool
	// Unchanged marks a TOASTed column an UPDATE did not touch: the change
	// carries no value for it, and the previous value must be kept.
	Unchanged bool
	// Binary marks Text as the value in PostgreSQL's binary form, not
	// text: a backfill chunk read for a destination that takes it
	// (sink.BinaryChunks) carries its non-key values so, and nothing else
	// does (see internal/pgbinary).
	Binary bool
}

// Text returns a non-null value.
func Text(s string) Value { return Value{Text: s} }

// Null is the SQL NULL.
var Null = Value{Null: true}

func (v Value) String() string {
	switch {
	case v.Unchanged:
		return "<unchanged>"
	case v.Null:
		return "NULL"
	}
	return v.Text
}

// Row is one value per table column, in column order.
type Row []Value

// Key extracts the key values of a row.
func (t *Table) RowKey(r Row) Key {
	k := make(Key, len(t.Key))
	for i, c := range t.Key {
		k[i] = r[c]
	}
	return k
}

// Key is the row key's values in key order.
type Key []Value

// Encode renders a key as a string usable as a map key: the same values
// always give the same string and different values different strings.
func (k Key) Encode() string {
	var b strings.Builder
	for _, v := range k {
		if v.Null {
			b.WriteString("N;")
			continue
		}
		b.WriteString(strconv.Itoa(len(v.Text)))
		b.WriteByte(':')
		b.WriteString(v.Text)
		b.WriteByte(';')
	}
	return b.String()
}

// Kind is the kind of a row change.
type Kind uint8

const (
	Insert Kind = iota + 1
	Update
	Delete
	Truncate
)

func (k Kind) String() string {
	switch k {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	case Truncate:
		return "truncate"
	}
	return "unknown"
}

// Change is one row change of a transaction.
type Change struct {
	Kind  Kind
	Table *Table
	// Row is the new row of an insert or update (with Unchanged markers).
	Row Row
	// OldKey is the key before an update that changed it, and the key of a
	// deleted row. It is nil for an update that kept its key.
	OldKey Key
	// Bytes is the size of the change as received, for counters.
	Bytes int
}

// Txn is one committed source transaction, in commit order.
type Txn struct {
	// Xid is the transaction id as the log carries it (32 bits).
	Xid        uint32
	CommitLSN  LSN
	EndLSN     LSN // position just after the commit record
	CommitTime time.Time
	Changes    []Change
}

// Event is what a source delivers, in order: a committed transaction, or
// progress (every transaction ending at or below Progress was delivered).
type Event struct {
	Txn      *Txn
	Progress LSN
	// Resume is the source's resume token after the event (a MySQL GTID
	// set), committed with its position; empty for a source without one.
	Resume string
}
