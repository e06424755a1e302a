package plan

import (
	"errors"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
)

// Instance modes.
const (
	ModeRun     = "run"
	ModeDryRun  = "dry_run" // recorded as succeeded without executing
	ModeBlocked = "blocked" // a paused task under PausedBlock: never runs, blocks what depends on it
)

// Input is everything Build looks at.
type Input struct {
	Graph   *dag.Graph
	Request Request
	// Now is the clock.
	Now time.Time
	// Sequence numbers the generated name (1 for the first backfill of the
	// task on Now's date).
	Sequence int
	// History reports earlier runs; nil means none.
	History History
	// ConfirmAbove is the instance count above which Request.Confirm is
	// required (0 means 10,000).
	ConfirmAbove int
}

// History is a snapshot of earlier runs of task dates.
type History interface {
	// Last returns the state of the latest run of task at business time biz
	// ("succeeded", "failed", "running", … or "" for none).
	Last(task string, biz time.Time) string
}

// Plan is the result of Build.
type Plan struct {
	Name  string    `json:"name"`
	Task  string    `json:"task"` // start task ID
	RunAt time.Time `json:"run_at"`
	// Dates are the selected business dates in run order; Groups[g] are the
	// dates of group g+1 in run order.
	Dates  []calendar.Date   `json:"dates"`
	Groups [][]calendar.Date `json:"groups"`
	// Tasks are the IDs of the tasks with instances, topological order.
	Tasks     []string   `json:"tasks"`
	Instances []Instance `json:"instances"`
	// Skipped counts task dates left out by the Succeeded or Running
	// policies.
	Skipped  int      `json:"skipped"`
	Warnings []string `json:"warnings,omitempty"`
}

// Instance is one planned run of a task for a business time.
type Instance struct {
	Task string `json:"task"`
	// BizTime is the business time; BizEnd differs from it only for single
	// instances covering several dates (the last date's business time).
	BizTime time.Time     `json:"biz_time"`
	BizEnd  time.Time     `json:"biz_end"`
	Date    calendar.Date `json:"date"`
	// Scheduled is when the recurring schedule would run the cycle.
	Scheduled time.Time `json:"scheduled"`
	// Group is 1-based; Seq is the position of Date within its group
	// (0-based): a date of a group starts when every instance of the
	// previous date of that group has finished.
	Group int `json:"group"`
	Seq   int `json:"seq"`
	// Order is the instance's position in a dispatch order that respects
	// every dependency (0-based).
	Order  int    `json:"order"`
	Mode   string `json:"mode"`
	Reason string `json:"reason,omitempty"` // why dry-run or blocked
	// Deps are the indexes in Plan.Instances of the instances this one
	// waits for (same-cycle upstream and its own previous cycle), ascending.
	// Plan.Instances is in Order, so every dep is smaller than the
	// instance's own index.
	Deps []int `json:"deps,omitempty"`
	// ResourceGroup is the pool the instance runs in.
	ResourceGroup string `json:"resource_group"`
}

// Build plans in.Request. Refusals are *RequestError values that say which
// field is wrong and what to do; other errors are programming errors (no
// graph, no clock). Build is pure: the same Input gives the same Plan.
//
// docs/batch-planner.md describes the semantics from a user's view.
func Build(in Input) (*Plan, error) {
	if in.Graph == nil {
		return nil, errors.New("plan: Input.Graph is nil")
	}
	if in.Now.IsZero() {
		return nil, errors.New("plan: Input.Now is not set")
	}
	b := &builder{in: in, g: in.Graph}
	return b.build()
}

// RequestError is a refusal of a request: Field names the request field.
type RequestError struct {
	Field   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}
