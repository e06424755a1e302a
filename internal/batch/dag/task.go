// Package dag holds recurring task definitions and the dependency graph
// between them: lookups, levels of upstream and downstream, and the node
// selections a backfill request can make.
package dag

import (
	"encoding/json"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/change"
)

// Task types.
const (
	TypeShell = "shell"
	TypeSQL   = "sql"
	TypeNoop  = "noop"
)

// Task is one recurring task as declared in the configuration.
type Task struct {
	// ID is "project.name"; names are unique within a project.
	ID      string
	Name    string
	Project string
	Owner   string
	// Output is the name of what the task produces (a table, a partition
	// family); backfills can select tasks by it.
	Output string

	Type       string // TypeShell, TypeSQL or TypeNoop
	Command    string // shell: run with /bin/sh -c
	Connection string // sql: name of a configured connection
	SQL        string // sql: statements, run in one transaction

	Schedule calendar.Schedule

	// Upstream lists the IDs of the tasks this one depends on in the same
	// cycle (see docs/batch.md for tasks with other schedules).
	Upstream []string
	// SelfDependent tasks depend on their own previous cycle.
	SelfDependent bool

	// Params are rendered with the instance's business time; Outputs are
	// the output parameters a downstream task can read, with their
	// defaults.
	Params  []Param
	Outputs []Param

	// Env names the variables of the daemon's environment a shell task
	// receives besides tidemark's own (see docs/batch-runners.md).
	Env []string

	Paused         bool
	DryRun         bool
	SingleInstance bool // one instance may cover all dates of a backfill

	Retries       int
	RetryBackoff  time.Duration // doubles after each failed attempt
	Timeout       time.Duration // 0 is none
	ResourceGroup string

	// Reads lists the streamed objects the task reads, each with the
	// column that places a row on a business date (docs/lineage.md).
	Reads []Read
	// OnChange is what tidemark does when a backfill changes rows of dates
	// the task has run (docs/lineage.md); nil does nothing.
	OnChange *OnChange
}

// On-change actions.
const (
	OnChangeOff     = "off"
	OnChangePropose = "propose"
	OnChangeRun     = "run"
)

// OnChange is a task's policy for rows of its past dates that a backfill
// changed.
type OnChange struct {
	Action string // OnChangeOff, OnChangePropose or OnChangeRun
	// Settle is how long to wait for more changes before acting.
	Settle time.Duration
	// MaxPerDay caps the batch backfills started on their own per day;
	// past it, changes wait in a proposal.
	MaxPerDay int
	// Backfill holds the batch backfill's options as the API takes them
	// (plan.Request without task, dates, time range, start or name).
	Backfill json.RawMessage
}

// Read is a streamed object a task reads.
type Read struct {
	Stream string // a configured stream's name
	// Object is the table as written ("schema.table", quoted where its
	// names need it); Table is the table it names, once it parsed.
	Object string
	Table  change.TableID
	// DateColumn places each row on a business date; a date, timestamp
	// or timestamptz column.
	DateColumn string
	// Location is the time zone the column's values are read in: the
	// task's own unless the read gives one.
	Location *time.Location
	// LateAfter, when not 0, makes a live change to a row of a date older
	// than this late data, which acts like a backfill's change.
	LateAfter time.Duration
}

// Param is a named value.
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
