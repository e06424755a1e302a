package sink

import (
	"context"

	"github.com/tidemark/tidemark/internal/change"
)

// Alterer is what a destination does for schema changes (see
// docs/schema-changes.md). Both sinks implement it; like the rest of a
// Sink it is used by one goroutine at a time, never during an Apply.
type Alterer interface {
	// AlterTable changes the destination table of t (t is its shape after
	// the steps) by the steps, in order. Each step is idempotent: a column
	// already added, renamed or of the target type is left alone. An error
	// wrapping ErrRejected means the destination refuses the change.
	AlterTable(ctx context.Context, t *change.Table, steps []AlterStep) error
	// CheckTable compares the destination table of t with t. It returns
	// the steps that make the destination hold t's rows (columns to add,
	// types to widen) and the differences no step fixes (a destination
	// column t lacks, a type that cannot hold t's values, another key).
	// exists is false when there is no such table.
	CheckTable(ctx context.Context, t *change.Table) (check TableCheck, err error)
}

// TableCheck is what CheckTable found.
type TableCheck struct {
	Exists   bool
	Steps    []AlterStep
	Problems []string
}

// AlterKind is what one step of a schema change does.
type AlterKind uint8

const (
	// AddColumn adds Column; the rows already there get Default.
	AddColumn AlterKind = iota + 1
	// RenameColumn renames Prev.Name to Column.Name.
	RenameColumn
	// SetType changes the column's type from Prev's to Column's, a
	// widening (change.Widens) that keeps every value.
	SetType
)

func (k AlterKind) String() string {
	switch k {
	case AddColumn:
		return "add column"
	case RenameColumn:
		return "rename column"
	case SetType:
		return "set type"
	}
	return "unknown"
}

// AlterStep is one change of a destination table.
type AlterStep struct {
	Kind AlterKind
	// Column is the column as it is after the step.
	Column change.Column
	// Prev is the column before a rename or a type change.
	Prev change.Column
	// Default, for AddColumn, is the value the rows already in the table
	// get, and rows inserted without the column later; nil is NULL.
	Default *change.Value
}
