package store

import (
	"encoding/json"
	"slices"
	"time"
)

// Batch backfill states.
const (
	BatchWaiting   = "waiting"   // created; its run time has not come
	BatchRunning   = "running"   // dispatching instances
	BatchSucceeded = "succeeded" // every instance succeeded or dry-ran
	BatchFailed    = "failed"    // an instance failed and nothing else can run
	BatchStopped   = "stopped"   // stopped by someone
	BatchBlocked   = "blocked"   // only instances behind a blocked (paused) instance remain
)

// Instance states.
const (
	InstanceWaiting   = "waiting"
	InstanceRunning   = "running"
	InstanceSucceeded = "succeeded"
	InstanceFailed    = "failed"
	InstanceStopped   = "stopped"
	InstanceDryRun    = "dry_run" // recorded as succeeded without executing
	InstanceBlocked   = "blocked" // a paused task's instance under the block policy
)

// ValidBatchState reports whether state is a known batch backfill state.
func ValidBatchState(state string) bool {
	switch state {
	case BatchWaiting, BatchRunning, BatchSucceeded, BatchFailed, BatchStopped, BatchBlocked:
		return true
	}
	return false
}

// batchInstanceStates are the instance states.
var batchInstanceStates = []string{InstanceWaiting, InstanceRunning, InstanceSucceeded, InstanceFailed, InstanceStopped, InstanceDryRun, InstanceBlocked}

// ValidInstanceState reports whether state is a known instance state.
func ValidInstanceState(state string) bool {
	return slices.Contains(batchInstanceStates, state)
}

// Instance modes.
const (
	InstanceModeRun     = "run"
	InstanceModeDryRun  = "dry_run"
	InstanceModeBlocked = "blocked"
)

// BatchBackfill is one backfill of recurring tasks: a plan of instances.
type BatchBackfill struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Task      string `json:"task"` // the task it started from
	StartedBy string `json:"started_by"`
	// Request is the request as submitted (its options), JSON.
	Request json.RawMessage `json:"request"`
	State   string          `json:"state"`
	Error   string          `json:"error,omitempty"`

	CreatedAt  time.Time  `json:"created_at"`
	RunAt      time.Time  `json:"run_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`

	// Instances is the number of instances; States counts them by state
	// (filled by GetBatchBackfill and ListBatchBackfills).
	Instances int            `json:"instances"`
	States    map[string]int `json:"states,omitempty"`
}

// BatchInstance is one run of a task for a business time, either of a
// backfill or (BackfillID 0) of the recurring schedule.
type BatchInstance struct {
	ID         int64     `json:"id"`
	BackfillID int64     `json:"backfill_id,omitempty"`
	Task       string    `json:"task"`
	BizTime    time.Time `json:"biz_time"`
	BizEnd     time.Time `json:"biz_end"`
	Scheduled  time.Time `json:"scheduled"`
	Group      int       `json:"group"`
	Seq        int       `json:"seq"`
	Order      int       `json:"order"`
	// Mode is how it was planned: "run", "dry_run" or "blocked".
	Mode          string `json:"mode"`
	ResourceGroup string `json:"resource_group"`

	State  string `json:"state"`
	Reason string `json:"reason,omitempty"` // why waiting, dry-run, blocked or stopped

	Attempt    int        `json:"attempt"`
	NextTry    *time.Time `json:"next_try,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`

	// The running attempt's process group (shell) or session tag (SQL), so
	// that a restarted daemon can end what a killed one left running.
	PID       int    `json:"pid,omitempty"`
	PGID      int    `json:"pgid,omitempty"`
	ProcStart uint64 `json:"proc_start,omitempty"`
	// Host is where the process group runs (cluster.host or the host
	// name): only there can it be ended.
	Host   string `json:"host,omitempty"`
	SQLTag string `json:"sql_tag,omitempty"`

	Rendered string            `json:"rendered,omitempty"` // the code as run
	Outputs  map[string]string `json:"outputs,omitempty"`
	Error    string            `json:"error,omitempty"`

	// Deps are the IDs of the instances this one waits for.
	Deps []int64 `json:"deps,omitempty"`
}

// BatchBackfillFilter selects backfills; zero fields don't filter.
type BatchBackfillFilter struct {
	Task, State, StartedBy string
	Since, Until           time.Time // bound CreatedAt: Since <= CreatedAt < Until
	Limit                  int       // 0 means DefaultBackfillLimit
}

// BatchInstanceFilter selects instances; zero fields don't filter.
type BatchInstanceFilter struct {
	BackfillID int64 // 0: any
	Scheduled  bool  // only the recurring schedule's (BackfillID 0)
	Task       string
	States     []string
	AfterID    int64 // for paging: ID > AfterID
	ThroughID  int64 // for paging a part: ID <= ThroughID (0: no bound)
	Limit      int   // 0 means 10,000
	// Sparse reads the instances that have not run (their run columns all
	// at their defaults) without those columns, then the others whole:
	// the same instances, faster when most have not run (a restart's read
	// of a large backfill), slower when most have.
	Sparse bool
}

// TaskTime names a task's cycle.
type TaskTime struct {
	Task    string
	BizTime time.Time
}
