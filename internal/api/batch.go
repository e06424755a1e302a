package api

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// The batch routes: recurring tasks, their DAG and their backfills.
func (s *Server) batchRoutes() {
	s.handle("GET /api/v1/tasks", viewer, s.listTasks)
	s.handle("GET /api/v1/tasks/{task}", viewer, s.getTask)
	s.handle("POST /api/v1/batch/preview", operator, s.previewBatch)
	s.handle("POST /api/v1/batch/backfills", operator, s.submitBatch)
	s.handle("GET /api/v1/batch/backfills", viewer, s.listBatch)
	s.handle("GET /api/v1/batch/backfills/{id}", viewer, s.getBatch)
	s.handle("POST /api/v1/batch/backfills/{id}/stop", operator, s.stopBatch)
	s.handle("POST /api/v1/batch/backfills/{id}/rerun", operator, s.rerunBatch)
	s.handle("GET /api/v1/batch/backfills/{id}/instances", viewer, s.listInstances)
	s.handle("GET /api/v1/batch/backfills/{id}/nodes.csv", viewer, s.exportNodes)
	s.handle("GET /api/v1/batch/instances", viewer, s.listInstances)
	s.handle("GET /api/v1/batch/instances/{id}", viewer, s.getInstance)
	s.handle("GET /api/v1/batch/instances/{id}/log", viewer, s.instanceLog)
	s.handle("POST /api/v1/batch/instances/{id}/stop", operator, s.instanceAction)
	s.handle("POST /api/v1/batch/instances/{id}/rerun", operator, s.instanceAction)
	s.handle("POST /api/v1/batch/instances/{id}/mark-succeeded", operator, s.instanceAction)
}

func (s *Server) engine() (*engine.Engine, error) {
	if s.batch == nil {
		return nil, &Error{Status: http.StatusNotFound, Code: "no_tasks", Message: "no recurring tasks are configured: declare them under tasks: in the config (docs/config.md)"}
	}
	return s.batch, nil
}

// TaskView is a task as the API shows it.
type TaskView struct {
	ID            string      `json:"id"`
	Name          string      `json:"name"`
	Project       string      `json:"project"`
	Owner         string      `json:"owner,omitempty"`
	Output        string      `json:"output,omitempty"`
	Type          string      `json:"type"`
	Schedule      string      `json:"schedule"`
	Timezone      string      `json:"timezone"`
	Upstream      []string    `json:"upstream"`
	Downstream    []string    `json:"downstream"`
	SelfDependent bool        `json:"self_dependent,omitempty"`
	Paused        bool        `json:"paused,omitempty"`
	DryRun        bool        `json:"dry_run,omitempty"`
	Single        bool        `json:"single_instance,omitempty"`
	ResourceGroup string      `json:"resource_group"`
	Params        []ParamView `json:"params,omitempty"`
	Outputs       []ParamView `json:"outputs,omitempty"`
	Code          string      `json:"code,omitempty"`
	// Reads are the streamed objects the task reads (docs/lineage.md).
	Reads []ReadView `json:"reads"`
}

// ReadView is a streamed object a task reads.
type ReadView struct {
	Stream     string `json:"stream"`
	Object     string `json:"object"`
	DateColumn string `json:"date_column"`
	Timezone   string `json:"timezone"`
	// LateAfter is the read's late_after ("24h0m0s"), "" when off.
	LateAfter string `json:"late_after,omitempty"`
}

func readViews(rs []dag.Read) []ReadView {
	out := make([]ReadView, 0, len(rs))
	for _, r := range rs {
		v := ReadView{Stream: r.Stream, Object: config.FormatTable(r.Table), DateColumn: r.DateColumn, Timezone: r.Location.String()}
		if r.LateAfter > 0 {
			v.LateAfter = r.LateAfter.String()
		}
		out = append(out, v)
	}
	return out
}

func taskView(g *dag.Graph, t *dag.Task) TaskView {
	code := t.Command
	if t.Type == dag.TypeSQL {
		code = t.SQL
	}
	return TaskView{ID: t.ID, Name: t.Name, Project: t.Project, Owner: t.Owner, Output: t.Output, Type: t.Type,
		Schedule: t.Schedule.String(), Timezone: t.Schedule.Location.String(),
		Upstream: nonNil(g.Upstream(t.ID)), Downstream: nonNil(g.Downstream(t.ID)),
		SelfDependent: t.SelfDependent, Paused: t.Paused, DryRun: t.DryRun, Single: t.SingleInstance,
		ResourceGroup: t.ResourceGroup, Params: paramViews(t.Params), Outputs: paramViews(t.Outputs), Code: code,
		Reads: readViews(t.Reads)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, _ string) error {
	e, err := s.engine()
	if err != nil {
		return err
	}
	g := e.Graph()
	var out []TaskView
	for _, t := range g.Tasks() {
		out = append(out, taskView(g, t))
	}
	return writeList(w, out)
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request, _ string) error {
	e, err := s.engine()
	if err != nil {
		return err
	}
	t, err := e.Graph().Lookup(r.PathValue("task"))
	if err != nil {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	}
	writeJSON(w, http.StatusOK, taskView(e.Graph(), t))
	return nil
}

// PlanView is a plan as the preview shows it: every instance with its
// times in the task's and the user's time zone and what it waits for.
type PlanView struct {
	Name      string            `json:"name"`
	Task      string            `json:"task"`
	StartAt   time.Time         `json:"start_at"`
	RunAt     time.Time         `json:"run_at"` // StartAt's deprecated alias
	Dates     []string          `json:"dates"`
	Groups    [][]string        `json:"groups"`
	Tasks     []string          `json:"tasks"`
	Count     int               `json:"count"`
	Skipped   int               `json:"skipped"`
	Warnings  []string          `json:"warnings,omitempty"`
	Timezone  string            `json:"user_timezone"`
	Instances []PlannedInstance `json:"instances"`
	Truncated bool              `json:"truncated,omitempty"`
}

// PlannedInstance is one instance of a preview.
type PlannedInstance struct {
	Index         int    `json:"index"`
	Task          string `json:"task"`
	Date          string `json:"date"`
	BizTime       string `json:"biz_time"`       // task's time zone
	ScheduledTask string `json:"scheduled"`      // task's time zone
	ScheduledUser string `json:"scheduled_user"` // user's time zone
	Group         int    `json:"group"`
	Seq           int    `json:"seq"`
	Order         int    `json:"order"`
	Mode          string `json:"mode"`
	Reason        string `json:"reason,omitempty"`
	WaitsFor      []int  `json:"waits_for,omitempty"`
	ResourceGroup string `json:"resource_group"`
}

func planView(g *dag.Graph, p *plan.Plan, user *time.Location, limit int) PlanView {
	v := PlanView{Name: p.Name, Task: p.Task, StartAt: p.RunAt, RunAt: p.RunAt, Tasks: p.Tasks, Count: len(p.Instances),
		Skipped: p.Skipped, Warnings: p.Warnings, Timezone: user.String(), Instances: []PlannedInstance{}}
	for _, d := range p.Dates {
		v.Dates = append(v.Dates, d.String())
	}
	for _, grp := range p.Groups {
		var ds []string
		for _, d := range grp {
			ds = append(ds, d.String())
		}
		v.Groups = append(v.Groups, ds)
	}
	const layout = "2006-01-02 15:04 MST"
	listed := dateOrder(p)
	pos := make([]int, len(listed)) // plan index → place in listed
	for i, k := range listed {
		pos[k] = i
	}
	for i, k := range listed {
		if i >= limit {
			v.Truncated = true
			break
		}
		in := p.Instances[k]
		waits := make([]int, len(in.Deps))
		for j, d := range in.Deps {
			waits[j] = pos[d]
		}
		slices.Sort(waits)
		loc := time.UTC
		if t, ok := g.Task(in.Task); ok && t.Schedule.Location != nil {
			loc = t.Schedule.Location
		}
		v.Instances = append(v.Instances, PlannedInstance{Index: i, Task: in.Task, Date: in.Date.String(),
			BizTime: in.BizTime.In(loc).Format(layout), ScheduledTask: in.Scheduled.In(loc).Format(layout),
			ScheduledUser: in.Scheduled.In(user).Format(layout), Group: in.Group, Seq: in.Seq, Order: in.Order,
			Mode: in.Mode, Reason: in.Reason, WaitsFor: waits, ResourceGroup: in.ResourceGroup})
	}
	return v
}

// dateOrder lists the plan's instances (indexes in p.Instances) by date in
// run order, then in dispatch order: a preview numbers them so, once.
func dateOrder(p *plan.Plan) []int {
	rank := make(map[calendar.Date]int, len(p.Dates))
	for i, d := range p.Dates {
		rank[d] = i
	}
	listed := make([]int, len(p.Instances))
	for i := range listed {
		listed[i] = i
	}
	slices.SortStableFunc(listed, func(a, b int) int {
		return cmp.Compare(rank[p.Instances[a].Date], rank[p.Instances[b].Date])
	})
	return listed
}

// userZone reads ?tz= (default UTC).
func userZone(r *http.Request) (*time.Location, error) {
	name := r.URL.Query().Get("tz")
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, badRequest("tz %q is not a time zone: use an IANA name such as Europe/Paris", name)
	}
	return loc, nil
}

func (s *Server) previewBatch(w http.ResponseWriter, r *http.Request, _ string) error {
	e, err := s.engine()
	if err != nil {
		return err
	}
	user, err := userZone(r)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 1000, 1, 1000000)
	if err != nil {
		return err
	}
	var req plan.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := e.Preview(r.Context(), req)
	if err != nil {
		return planError(err)
	}
	writeJSON(w, http.StatusOK, planView(e.Graph(), p, user, limit))
	return nil
}

// SubmitResponse is the answer to a submitted batch backfill.
type SubmitResponse struct {
	BatchBackfill BatchBackfillView `json:"batch_backfill"`
	// Backfill is BatchBackfill's deprecated alias, which reads like a
	// table backfill.
	Backfill BatchBackfillView `json:"backfill"`
	Plan     PlanView          `json:"plan"`
}

func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request, who string) error {
	e, err := s.engine()
	if err != nil {
		return err
	}
	user, err := userZone(r)
	if err != nil {
		return err
	}
	var req plan.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	var pv PlanView // described while the engine still holds the plan
	rec, err := e.Submit(r.Context(), req, who, func(p *plan.Plan) { pv = planView(e.Graph(), p, user, 100) })
	if err != nil {
		return planError(err)
	}
	v := batchBackfillView(rec)
	writeJSON(w, http.StatusCreated, SubmitResponse{BatchBackfill: v, Backfill: v, Plan: pv})
	return nil
}

// planError turns a refused request into a 400 that names the field.
func planError(err error) error {
	var re *plan.RequestError
	if errors.As(err, &re) {
		code := "bad_request"
		if re.Field == "confirm" {
			code = "confirm"
		}
		return &Error{Status: http.StatusBadRequest, Code: code, Message: re.Error()}
	}
	return engineError(err)
}

func engineError(err error) error {
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	case errors.Is(err, engine.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "refused", Message: err.Error()}
	}
	return err
}

// decodeOptional is decode for a body that may be empty.
func decodeOptional(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decode(r, v)
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s %q: use a number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// engineAndID is the batch engine and the path's {id}, for the routes that
// act on one backfill or instance.
func (s *Server) engineAndID(r *http.Request, what string) (*engine.Engine, int64, error) {
	e, err := s.engine()
	if err != nil {
		return nil, 0, err
	}
	id, err := pathID(r, what)
	return e, id, err
}

func pathID(r *http.Request, what string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%s id %q is not a positive number", what, r.PathValue("id"))
	}
	return id, nil
}

func (s *Server) listBatch(w http.ResponseWriter, r *http.Request, _ string) error {
	q := r.URL.Query()
	f := store.BatchBackfillFilter{Task: q.Get("task"), State: q.Get("state"), StartedBy: q.Get("started_by")}
	if f.State != "" && !store.ValidBatchState(f.State) {
		return badRequest("state %q: use waiting, running, succeeded, failed, stopped or blocked", f.State)
	}
	var err error
	if f.Since, err = parseTime("since", q.Get("since")); err != nil {
		return err
	}
	if f.Until, err = parseTime("until", q.Get("until")); err != nil {
		return err
	}
	if f.Limit, err = intParam(r, "limit", 0, 1, 100000); err != nil {
		return err
	}
	recs, err := s.st.ListBatchBackfills(r.Context(), f)
	if err != nil {
		return err
	}
	return writeList(w, convert(recs, batchBackfillView))
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request, _ string) error {
	return writeByID(w, r, "batch backfill", s.st.GetBatchBackfill, func(b store.BatchBackfill) BatchBackfillView {
		v := batchBackfillView(b)
		if p, ok, err := s.st.ProposalOfBatch(r.Context(), b.ID); err == nil && ok {
			v.CausedBy = causedByLines(p)
		} else if err != nil {
			s.log.Warn("read the proposal of a batch backfill", logkey.BatchBackfill(b.ID), logkey.Err(err))
		}
		return v
	})
}

// writeList answers 200 with a JSON array, [] when empty.
func writeList[T any](w http.ResponseWriter, list []T) error {
	if list == nil {
		list = []T{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// writeByID answers 200 with the view of the record the path's {id} names.
func writeByID[T, V any](w http.ResponseWriter, r *http.Request, what string, get func(context.Context, int64) (T, error), view func(T) V) error {
	id, err := pathID(r, what)
	if err != nil {
		return err
	}
	v, err := get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view(v))
	return nil
}

func (s *Server) stopBatch(w http.ResponseWriter, r *http.Request, who string) error {
	e, id, err := s.engineAndID(r, "batch backfill")
	if err != nil {
		return err
	}
	if err := e.StopBackfill(r.Context(), id, who); err != nil {
		return engineError(err)
	}
	return s.getBatch(w, r, who)
}

// RerunRequest names instances to re-run; empty means every failed or
// stopped one.
type RerunRequest struct {
	Instances []int64 `json:"instances,omitempty"`
}

func (s *Server) rerunBatch(w http.ResponseWriter, r *http.Request, who string) error {
	e, id, err := s.engineAndID(r, "batch backfill")
	if err != nil {
		return err
	}
	var req RerunRequest
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	if _, err := e.Rerun(r.Context(), id, req.Instances, who); err != nil {
		return engineError(err)
	}
	return s.getBatch(w, r, who)
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request, _ string) error {
	q := r.URL.Query()
	f := store.BatchInstanceFilter{Task: q.Get("task"), Scheduled: q.Get("scheduled") == "true"}
	if r.PathValue("id") != "" {
		if f.Scheduled {
			return badRequest("scheduled=true lists the recurring schedule's instances: use GET /api/v1/batch/instances?scheduled=true")
		}
		id, err := pathID(r, "batch backfill")
		if err != nil {
			return err
		}
		if _, err := s.st.GetBatchBackfill(r.Context(), id); err != nil {
			return err
		}
		f.BackfillID = id
	}
	if st := q.Get("state"); st != "" {
		if !store.ValidInstanceState(st) {
			return badRequest("state %q: use waiting, running, succeeded, failed, stopped, dry_run or blocked", st)
		}
		f.States = []string{st}
	}
	if a := q.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return badRequest("after %q: use an instance id", a)
		}
		f.AfterID = n
	}
	var err error
	if f.Limit, err = intParam(r, "limit", 1000, 1, 100000); err != nil {
		return err
	}
	out, err := s.st.ListBatchInstances(r.Context(), f)
	if err != nil {
		return err
	}
	return writeList(w, convert(out, batchInstanceView))
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request, _ string) error {
	return writeByID(w, r, "instance", s.st.GetBatchInstance, batchInstanceView)
}

// LogView is an attempt's log.
type LogView struct {
	Instance int64  `json:"instance"`
	Attempt  int    `json:"attempt"`
	Log      string `json:"log"`
}

func (s *Server) instanceLog(w http.ResponseWriter, r *http.Request, _ string) error {
	id, err := pathID(r, "instance")
	if err != nil {
		return err
	}
	attempt, err := intParam(r, "attempt", 0, 1, 1000000)
	if err != nil {
		return err
	}
	text, got, err := s.st.GetInstanceLog(r.Context(), id, attempt)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, LogView{Instance: id, Attempt: got, Log: text})
	return nil
}

// instanceAction stops, re-runs or marks one instance succeeded, by the
// last segment of the path.
func (s *Server) instanceAction(w http.ResponseWriter, r *http.Request, who string) error {
	e, id, err := s.engineAndID(r, "instance")
	if err != nil {
		return err
	}
	in, err := s.st.GetBatchInstance(r.Context(), id)
	if err != nil {
		return err
	}
	switch lastSegment(r.URL.Path) {
	case "stop":
		err = e.StopInstance(r.Context(), id, who)
	case "rerun":
		if in.BackfillID == 0 {
			err = e.RerunScheduled(r.Context(), id, who)
			break
		}
		_, err = e.Rerun(r.Context(), in.BackfillID, []int64{id}, who)
	default:
		if in.BackfillID == 0 {
			err = e.MarkScheduledSucceeded(r.Context(), id, who)
			break
		}
		err = e.MarkSucceeded(r.Context(), in.BackfillID, id, who)
	}
	if err != nil {
		return engineError(err)
	}
	return s.getInstance(w, r, who)
}

func lastSegment(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
