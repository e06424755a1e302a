package sink

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	// MakeGenerated makes Column, a stored generated column of the source,
	// one the destination computes from its expression: a column of that
	// name it holds as a plain one is replaced (see Computer).
	MakeGenerated
)

func (k AlterKind) String() string {
	switch k {
	case AddColumn:
		return "add column"
	case RenameColumn:
		return "rename column"
	case SetType:
		return "set type"
	case MakeGenerated:
		return "make generated"
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

// CompareColumns adds to check what the destination table, whose columns
// are named dest, needs to hold t's columns: a source column it lacks is
// added; one both have is judged by judge (dest index i), which may return
// a step and a problem; a destination column the source lacks is a problem,
// dropSQL saying how to drop it. Both sinks share it; only judge differs.
func CompareColumns(check *TableCheck, t *change.Table, dest []string, judge func(c change.Column, i int) (*AlterStep, string, error), dropSQL func(name string) string) error {
	index := make(map[string]int, len(dest))
	for i, name := range dest {
		index[name] = i
	}
	for _, c := range t.Columns {
		i, ok := index[c.Name]
		if !ok {
			check.Steps = append(check.Steps, AlterStep{Kind: AddColumn, Column: c})
			continue
		}
		delete(index, c.Name)
		step, problem, err := judge(c, i)
		if err != nil {
			return err
		}
		if step != nil {
			check.Steps = append(check.Steps, *step)
		}
		if problem != "" {
			check.Problems = append(check.Problems, problem)
		}
	}
	for _, name := range dest {
		if _, extra := index[name]; extra {
			check.Problems = append(check.Problems, fmt.Sprintf("destination column %q is not in the source table: drop it from the destination (%s)", name, dropSQL(name)))
		}
	}
	return nil
}

// KeyProblem compares a destination table's primary key, given as its
// columns' names by position in the key (any numbering that sorts in key
// order), with the source table's key; "" when they agree, else the
// difference and then fix.
func KeyProblem(t *change.Table, destKey map[int]string, fix string) string {
	positions := slices.Sorted(maps.Keys(destKey))
	got := make([]string, len(positions))
	for i, p := range positions {
		got[i] = destKey[p]
	}
	want := make([]string, len(t.Key))
	for i, c := range t.KeyColumns() {
		want[i] = c.Name
	}
	if slices.Equal(got, want) {
		return ""
	}
	return fmt.Sprintf("the destination's primary key is (%s), the source's key is (%s): %s", strings.Join(got, ", "), strings.Join(want, ", "), fix)
}
