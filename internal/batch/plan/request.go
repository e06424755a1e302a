// Package plan turns a backfill request into a plan: every instance to run
// (task and business time), its concurrency group and order, and what it
// waits for. Build is a pure function of the DAG, the request, the clock and
// a snapshot of earlier runs; it does no I/O.
package plan

import (
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
)

// Request is a backfill request as the API and CLI submit it. Zero values
// take the defaults documented on each field.
type Request struct {
	// Name defaults to "<task name>_<run date YYYYMMDD>_<sequence>".
	Name string `json:"name,omitempty"`
	// Task is the task the backfill starts from: an ID or a unique name.
	Task string `json:"task"`
	// StartAt, when set, is when the backfill starts; it must be in the
	// future. Nil runs now. Data timestamps whose cycles are due by then
	// are allowed; later ones are refused.
	StartAt *time.Time `json:"start_at,omitempty"`
	// RunAt is StartAt's deprecated alias (API v1; docs/api.md): "run"
	// names several table backfills started together. Sent with StartAt,
	// the two must be equal.
	RunAt *time.Time `json:"run_at,omitempty"`

	Dates     Dates      `json:"dates"`
	TimeRange *TimeRange `json:"time_range,omitempty"`
	Scope     Scope      `json:"scope"`

	// Groups is the number of concurrency groups, 1–12 (default 1): the
	// dates, in run order, are split into that many contiguous lanes (no
	// more lanes than dates) that run side by side, each lane one date
	// after another.
	Groups int `json:"groups,omitempty"`
	// Order is OrderAsc (default) or OrderDesc.
	Order string `json:"order,omitempty"`

	// DryRunTask makes the start task's instances dry-run.
	DryRunTask bool `json:"dry_run_task,omitempty"`
	// Paused is the policy for paused tasks' instances: PausedBlock
	// (default), PausedDryRun or PausedRun.
	Paused string `json:"paused,omitempty"`
	// DryRun is the policy for dry-run tasks' instances: DryRunDryRun
	// (default) or DryRunRun.
	DryRun string `json:"dry_run,omitempty"`
	// WaitScheduled holds each instance until its scheduled time.
	WaitScheduled bool `json:"wait_scheduled,omitempty"`
	// HourlyScope decides, when TimeRange is set, whether day-based tasks
	// run regardless (HourlyScopeAll, default) or only when their scheduled
	// time of day is within the range (HourlyScopeWithin).
	HourlyScope string `json:"hourly_scope,omitempty"`
	// ResourceGroup, when set, replaces every task's resource group.
	ResourceGroup string `json:"resource_group,omitempty"`
	// SingleInstance runs one instance covering all dates for tasks that
	// declare they can.
	SingleInstance bool `json:"single_instance,omitempty"`
	// Succeeded is what to do with task dates that already succeeded:
	// SucceededRerun (default, run them again), SucceededSkip (leave out
	// dates whose last run succeeded or was a dry-run), or
	// SucceededFailedOnly (run only dates whose last run failed or was
	// stopped: dates that never ran are left out too). See
	// docs/batch-planner.md.
	Succeeded string `json:"succeeded,omitempty"`
	// Running is what to do with task dates that have a run in progress:
	// RunningWait (default: run after it ends) or RunningSkip.
	Running string `json:"running,omitempty"`
	// StopOnFailure stops the whole backfill at the first failed instance;
	// otherwise a failure halts only the later dates of its group and what
	// depends on it.
	StopOnFailure bool `json:"stop_on_failure,omitempty"`
	// Confirm accepts a plan larger than the confirmation threshold.
	Confirm bool `json:"confirm,omitempty"`
}

// Dates selects the business dates (data timestamps).
type Dates struct {
	// Mode is DatesRange (default), DatesCycle or DatesCustom.
	Mode string `json:"mode,omitempty"`
	// From and To bound range and cycle selections, inclusive. A custom
	// selection leaves them out (zero), and so does its JSON.
	From calendar.Date `json:"from,omitzero"`
	To   calendar.Date `json:"to,omitzero"`
	// Weekdays and MonthDays (1–31, calendar.MonthEnd for the last day)
	// choose the dates of a cycle selection; a date is chosen when either
	// matches.
	Weekdays  []time.Weekday `json:"weekdays,omitempty"`
	MonthDays []int          `json:"month_days,omitempty"`
	// List is a custom selection.
	List []calendar.Date `json:"list,omitempty"`
}

// TimeRange selects, for minute, hourly and cron tasks, the cycles whose
// business time of day (local to the task) is within [From, To], both
// inclusive, as "HH:MM". From must not be after To.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Scope selects the tasks.
type Scope struct {
	// Mode is ScopeTask (default: the task alone), ScopeList or ScopeMass.
	Mode string `json:"mode,omitempty"`
	// List mode: levels of downstream and upstream tasks, 0 for none,
	// 1–10, or dag.AllLevels.
	Downstream int `json:"downstream,omitempty"`
	Upstream   int `json:"upstream,omitempty"`
	// Mass mode: Coverage is one of the Cover* values; Values are its
	// projects, output names, task names, task IDs, level-1 children, end
	// points or start points.
	Coverage string   `json:"coverage,omitempty"`
	Values   []string `json:"values,omitempty"`
	// ExcludeOutputs and ExcludeTasks (names or IDs) are removed from the
	// selection; where they sit between selected tasks they run as dry-run
	// instances so that what is below them proceeds.
	ExcludeOutputs []string `json:"exclude_outputs,omitempty"`
	ExcludeTasks   []string `json:"exclude_tasks,omitempty"`
	// KeepPaused turns off the default filtering of paused tasks and their
	// downstream out of list and mass selections.
	KeepPaused bool `json:"keep_paused,omitempty"`
}

// Enumerated request values.
const (
	OrderAsc  = "asc"
	OrderDesc = "desc"

	PausedBlock  = "block"
	PausedDryRun = "dry_run"
	PausedRun    = "run"

	DryRunDryRun = "dry_run"
	DryRunRun    = "run"

	HourlyScopeAll    = "all"
	HourlyScopeWithin = "within"

	SucceededRerun      = "rerun"
	SucceededSkip       = "skip"
	SucceededFailedOnly = "failed_only"

	RunningWait = "wait"
	RunningSkip = "skip"

	DatesRange  = "range"
	DatesCycle  = "cycle"
	DatesCustom = "custom"

	ScopeTask = "task"
	ScopeList = "list"
	ScopeMass = "mass"

	CoverProjects             = "projects"
	CoverOutputs              = "outputs"
	CoverDescendants          = "descendants"
	CoverChildren             = "children"
	CoverEndPoints            = "end_points"
	CoverStartPoints          = "start_points"
	CoverNames                = "names"
	CoverIDs                  = "ids"
	CoverAncestors            = "ancestors"
	CoverAncestorsDescendants = "ancestors_descendants"
)

// MaxGroups is the largest number of concurrency groups.
const MaxGroups = 12
