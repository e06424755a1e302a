package api

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// The API's own response types. Handlers convert store rows and stream
// results into these at the edge, so that the wire format is written here,
// once, and a field added to a store row does not reach clients unasked.
// Renamed fields keep their old name beside the new one as a deprecated
// alias carrying the same value (docs/api.md, "Words and deprecated
// aliases").

// BackfillView is one backfill: one copy of one table (docs/glossary.md).
type BackfillView struct {
	ID     int64  `json:"id"`
	Stream string `json:"stream"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// StartedBy is "automatic", "cli", "api", "api:<token name>", "reset"
	// or "repair".
	StartedBy string `json:"started_by"`
	// Options are what the backfill was asked for; a start time is under
	// both start_at and its deprecated alias run_at.
	Options map[string]any `json:"options,omitempty"`
	Status  string         `json:"status"`
	Error   string         `json:"error,omitempty"`

	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	LoadedAt   *time.Time `json:"loaded_at,omitempty"`

	RowsRead        int64 `json:"rows_read"`
	RowsWritten     int64 `json:"rows_written"`
	RowsRemoved     int64 `json:"rows_removed"`
	Bytes           int64 `json:"bytes"`
	Chunks          int64 `json:"chunks"`
	WindowConflicts int64 `json:"window_conflicts"`
	Retries         int64 `json:"retries"`
	RowsEstimate    int64 `json:"rows_estimate"`
	// RunID is the run the backfill belongs to, when initiated with
	// others as one run (0: none).
	RunID  int64       `json:"run_id,omitempty"`
	Verify *VerifyView `json:"verify,omitempty"`
}

// VerifyView is the verify that ended a backfill.
type VerifyView struct {
	Status          string     `json:"status"`
	SourceRows      int64      `json:"source_rows"`
	DestRows        int64      `json:"destination_rows"`
	Ranges          int        `json:"ranges"`
	DifferingRanges int        `json:"differing_ranges"`
	Error           string     `json:"error,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

// Option keys of a backfill: the start time's name and its deprecated
// alias.
const (
	optStartAt = "start_at"
	optRunAt   = "run_at"
)

func backfillView(b store.Backfill) BackfillView {
	v := BackfillView{ID: b.ID, Stream: b.Stream, Schema: b.Schema, Table: b.Table, StartedBy: b.StartedBy, Options: b.Options,
		Status: b.Status, Error: b.Error, CreatedAt: b.CreatedAt, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt, LoadedAt: b.LoadedAt,
		RowsRead: b.RowsRead, RowsWritten: b.RowsWritten, RowsRemoved: b.RowsRemoved, Bytes: b.Bytes, Chunks: b.Chunks,
		WindowConflicts: b.WindowConflicts, Retries: b.Retries, RowsEstimate: b.RowsEstimate, RunID: b.RunID}
	if at, ok := b.Options[optRunAt]; ok {
		v.Options = maps.Clone(b.Options)
		v.Options[optStartAt] = at
	}
	if b.Verify != nil {
		s := *b.Verify
		v.Verify = &VerifyView{Status: s.Status, SourceRows: s.SourceRows, DestRows: s.DestRows, Ranges: s.Ranges,
			DifferingRanges: s.DifferingRanges, Error: s.Error, FinishedAt: s.FinishedAt}
	}
	return v
}

func backfillViews(bs []store.Backfill) []BackfillView {
	return convert(bs, backfillView)
}

// convert maps a list through to; nil stays nil (null), empty stays empty
// ([]), as the list encoded before conversion.
func convert[T, V any](list []T, to func(T) V) []V {
	if list == nil {
		return nil
	}
	out := make([]V, 0, len(list))
	for _, x := range list {
		out = append(out, to(x))
	}
	return out
}

// RunView is a run: several backfills initiated together as one, with the
// status and totals derived from its members'.
type RunView struct {
	ID        int64     `json:"id"`
	Stream    string    `json:"stream"`
	StartedBy string    `json:"started_by"`
	CreatedAt time.Time `json:"created_at"`
	Status    string    `json:"status"`
	// Error joins the members' errors, each as "schema.table: error".
	Error        string     `json:"error,omitempty"`
	RowsRead     int64      `json:"rows_read"`
	RowsWritten  int64      `json:"rows_written"`
	Bytes        int64      `json:"bytes"`
	RowsEstimate int64      `json:"rows_estimate"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	// Backfills are the members, oldest first.
	Backfills []BackfillView `json:"backfills"`
}

func runView(r stream.RunView) RunView {
	return RunView{ID: r.ID, Stream: r.Stream, StartedBy: r.StartedBy, CreatedAt: r.CreatedAt, Status: r.Status, Error: r.Error,
		RowsRead: r.RowsRead, RowsWritten: r.RowsWritten, Bytes: r.Bytes, RowsEstimate: r.RowsEstimate,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Backfills: backfillViews(r.Backfills)}
}

// ColumnView is a column of an object as last described.
type ColumnView struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Key  bool   `json:"key,omitempty"`
}

func columnView(c store.ColumnInfo) ColumnView { return ColumnView(c) }

// EstimateView is the cost of backfilling some objects, before starting.
type EstimateView struct {
	Objects       []ObjectEstimateView `json:"objects"`
	Rows          int64                `json:"rows"`
	Bytes         int64                `json:"bytes"`
	Seconds       float64              `json:"seconds"`
	RowsPerSecond float64              `json:"rows_per_second"`
	Basis         string               `json:"basis"`
}

// ObjectEstimateView is one object's part of an estimate.
type ObjectEstimateView struct {
	Object    string  `json:"object"`
	Rows      int64   `json:"rows"` // -1: unknown
	RowsExact bool    `json:"rows_exact"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"` // 0: unknown
	Error     string  `json:"error,omitempty"`
}

func estimateView(e stream.Estimate) EstimateView {
	return EstimateView{Objects: convert(e.Objects, func(o stream.ObjectEstimate) ObjectEstimateView { return ObjectEstimateView(o) }),
		Rows: e.Rows, Bytes: e.Bytes, Seconds: e.Seconds, RowsPerSecond: e.RowsPerSecond, Basis: e.Basis}
}

// CheckView is the verify result of one object.
type CheckView struct {
	Object     string      `json:"object"`
	SourceRows int         `json:"source_rows"`
	DestRows   int         `json:"destination_rows"`
	Match      bool        `json:"match"`
	Ranges     []RangeView `json:"ranges"`
	Error      string      `json:"error,omitempty"`
	// Repair is the backfill a repair started for the differing ranges.
	Repair *BackfillView `json:"repair,omitempty"`
}

// RangeView is one key range a verify compared.
type RangeView struct {
	Low           []string   `json:"low,omitempty"`
	High          []string   `json:"high,omitempty"`
	SourceRows    int        `json:"source_rows"`
	DestRows      int        `json:"destination_rows"`
	SourceSum     string     `json:"source_checksum"`
	DestSum       string     `json:"destination_checksum"`
	Match         bool       `json:"match"`
	DifferingKeys [][]string `json:"differing_keys,omitempty"`
	// ComparedBy is "checksums" (each server summed the range) or "rows".
	ComparedBy string `json:"compared_by"`
}

func checkView(c stream.ObjectCheck) CheckView {
	v := CheckView{Object: c.Object, SourceRows: c.SourceRows, DestRows: c.DestRows, Match: c.Match, Error: c.Error,
		Ranges: convert(c.Ranges, func(r stream.RangeCheck) RangeView { return RangeView(r) })}
	if c.Repair != nil {
		b := backfillView(*c.Repair)
		v.Repair = &b
	}
	return v
}

// BatchBackfillView is a batch backfill: runs of recurring tasks for past
// business dates (docs/glossary.md).
type BatchBackfillView struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Task      string `json:"task"`
	StartedBy string `json:"started_by"`
	// Request is the request as submitted.
	Request    json.RawMessage `json:"request"`
	State      string          `json:"state"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartAt    time.Time       `json:"start_at"`
	RunAt      time.Time       `json:"run_at"` // StartAt's deprecated alias
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Instances  int             `json:"instances"`
	States     map[string]int  `json:"states,omitempty"`
	// CausedBy says which stream backfills or late data caused a batch
	// backfill submitted for a proposal (docs/lineage.md).
	CausedBy []string `json:"caused_by,omitempty"`
}

func batchBackfillView(b store.BatchBackfill) BatchBackfillView {
	return BatchBackfillView{ID: b.ID, Name: b.Name, Task: b.Task, StartedBy: b.StartedBy, Request: b.Request, State: b.State, Error: b.Error,
		CreatedAt: b.CreatedAt, StartAt: b.RunAt, RunAt: b.RunAt, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt, Instances: b.Instances, States: b.States}
}

// BatchInstanceView is one instance: one task for one business time,
// of a batch backfill or of the recurring schedule.
type BatchInstanceView struct {
	ID int64 `json:"id"`
	// BatchBackfillID is the batch backfill the instance belongs to (0,
	// left out: the recurring schedule's); BackfillID is its deprecated
	// alias, which reads like a table backfill's id.
	BatchBackfillID int64             `json:"batch_backfill_id,omitempty"`
	BackfillID      int64             `json:"backfill_id,omitempty"`
	Task            string            `json:"task"`
	BizTime         time.Time         `json:"biz_time"`
	BizEnd          time.Time         `json:"biz_end"`
	Scheduled       time.Time         `json:"scheduled"`
	Group           int               `json:"group"`
	Seq             int               `json:"seq"`
	Order           int               `json:"order"`
	Mode            string            `json:"mode"`
	ResourceGroup   string            `json:"resource_group"`
	State           string            `json:"state"`
	Reason          string            `json:"reason,omitempty"`
	Attempt         int               `json:"attempt"`
	NextTry         *time.Time        `json:"next_try,omitempty"`
	StartedAt       *time.Time        `json:"started_at,omitempty"`
	FinishedAt      *time.Time        `json:"finished_at,omitempty"`
	PID             int               `json:"pid,omitempty"`
	PGID            int               `json:"pgid,omitempty"`
	ProcStart       uint64            `json:"proc_start,omitempty"`
	Host            string            `json:"host,omitempty"`
	SQLTag          string            `json:"sql_tag,omitempty"`
	Rendered        string            `json:"rendered,omitempty"`
	Outputs         map[string]string `json:"outputs,omitempty"`
	Error           string            `json:"error,omitempty"`
	Deps            []int64           `json:"deps,omitempty"`
}

func batchInstanceView(i store.BatchInstance) BatchInstanceView {
	return BatchInstanceView{ID: i.ID, BatchBackfillID: i.BackfillID, BackfillID: i.BackfillID, Task: i.Task,
		BizTime: i.BizTime, BizEnd: i.BizEnd, Scheduled: i.Scheduled, Group: i.Group, Seq: i.Seq, Order: i.Order,
		Mode: i.Mode, ResourceGroup: i.ResourceGroup, State: i.State, Reason: i.Reason, Attempt: i.Attempt,
		NextTry: i.NextTry, StartedAt: i.StartedAt, FinishedAt: i.FinishedAt, PID: i.PID, PGID: i.PGID,
		ProcStart: i.ProcStart, Host: i.Host, SQLTag: i.SQLTag, Rendered: i.Rendered, Outputs: i.Outputs, Error: i.Error, Deps: i.Deps}
}

// ParamView is a task's parameter or output.
type ParamView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func paramViews(ps []dag.Param) []ParamView {
	return convert(ps, func(p dag.Param) ParamView { return ParamView(p) })
}

// StreamEventView is a stream's event: exactly one of Backfill, State and
// Lag.
type StreamEventView struct {
	Stream   string           `json:"stream"`
	Backfill *BackfillView    `json:"backfill,omitempty"`
	State    *StreamStateView `json:"state,omitempty"`
	Lag      *LagView         `json:"lag,omitempty"`
}

// StreamStateView is a stream's lifecycle state, as events send it.
type StreamStateView struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// LagView says that a stream's lag crossed its lag_warn, either way.
type LagView struct {
	Over             bool    `json:"over"`
	LagSeconds       float64 `json:"lag_seconds"`
	ThresholdSeconds float64 `json:"threshold_seconds"`
	Reason           string  `json:"reason"`
}

// DeprecatedBatchBackfillKind is the kind a batch backfill's change had in
// API v1 before it was "batch_backfill": the event stream sends each such
// change twice, under the new kind and then under this one, until v2.
const DeprecatedBatchBackfillKind = "backfill"

// BatchEventView is an instance's or a batch backfill's state change.
type BatchEventView struct {
	// Kind is "instance" or "batch_backfill" (and, the same change sent
	// again, DeprecatedBatchBackfillKind).
	Kind string `json:"kind"`
	// BatchBackfillID is the batch backfill's id (left out for instances
	// of the recurring schedule); BackfillID its deprecated alias.
	BatchBackfillID int64     `json:"batch_backfill_id,omitempty"`
	BackfillID      int64     `json:"backfill_id,omitempty"`
	InstanceID      int64     `json:"instance_id,omitempty"`
	Task            string    `json:"task,omitempty"`
	State           string    `json:"state"`
	Time            time.Time `json:"time"`
}

// eventViews is an event of a stream or of the batch engine as the event
// stream sends it: one view, or for a batch backfill's change two, the
// second under the kind's deprecated alias.
func eventViews(ev any) []any {
	v := eventView(ev)
	if b, ok := v.(BatchEventView); ok && b.Kind == engine.KindBatchBackfill {
		old := b
		old.Kind = DeprecatedBatchBackfillKind
		return []any{b, old}
	}
	return []any{v}
}

// eventView is an event of a stream or of the batch engine as the event
// stream sends it.
func eventView(ev any) any {
	switch e := ev.(type) {
	case stream.Event:
		v := StreamEventView{Stream: e.Stream}
		if e.Backfill != nil {
			b := backfillView(*e.Backfill)
			v.Backfill = &b
		}
		if e.State != nil {
			st := StreamStateView(*e.State)
			v.State = &st
		}
		if e.Lag != nil {
			l := LagView(*e.Lag)
			v.Lag = &l
		}
		return v
	case engine.Event:
		return BatchEvent(e)
	}
	return ev
}

// BatchEvent is the batch engine's event as the API sends it (and the
// CLI's --json prints it).
func BatchEvent(e engine.Event) BatchEventView {
	return BatchEventView{Kind: e.Kind, BatchBackfillID: e.BackfillID, BackfillID: e.BackfillID, InstanceID: e.InstanceID,
		Task: e.Task, State: e.State, Time: e.Time}
}
