package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/fanout"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// StreamView is a stream as the API shows it.
type StreamView struct {
	Name             string       `json:"name"`
	State            string       `json:"state"`
	Reason           string       `json:"reason,omitempty"`
	UpdatedAt        time.Time    `json:"updated_at"`
	RetainedWALBytes int64        `json:"retained_wal_bytes"`
	Source           EndpointView `json:"source"`
	Destination      EndpointView `json:"destination"`
	// Node is the cluster node running the stream ("" when none does, and
	// outside a cluster).
	Node string `json:"node,omitempty"`
}

// EndpointView is a stream's source or destination: its type, where it is
// (never with a password) and, for a destination, what it can do beyond
// applying changes (sink.Capabilities: a log cannot replace key ranges,
// so a filtered backfill into it is refused).
type EndpointView struct {
	Type         string   `json:"type"`
	Title        string   `json:"title,omitempty"`
	Where        string   `json:"where"`
	Capabilities []string `json:"capabilities,omitempty"`
}

func (s *Server) view(name string) StreamView {
	str := s.streams[name]
	st := str.State()
	cfg := str.Config()
	v := StreamView{Name: name, State: st.State, Reason: st.Reason, UpdatedAt: st.UpdatedAt, RetainedWALBytes: str.RetainedWAL(),
		Source: EndpointView{Type: cfg.Source.Type, Where: config.Redact(cfg.Source.DSN)}, Destination: destinationView(cfg)}
	if s.cluster != nil {
		s.clusterView(&v)
	}
	return v
}

func destinationView(cfg config.Stream) EndpointView {
	d := cfg.Destination
	v := EndpointView{Type: d.Type, Where: sink.Where(d, cfg.Name), Capabilities: []string{}}
	if t, err := sink.Lookup(d.Type); err == nil {
		v.Title = t.Title
		for _, c := range sink.Capabilities(t.Example) {
			v.Capabilities = append(v.Capabilities, string(c))
		}
	}
	return v
}

func (s *Server) listStreams(w http.ResponseWriter, r *http.Request, _ string) error {
	out := make([]StreamView, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.view(n))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// streamAction answers with the stream's view after act (nil: just the
// view), with status.
func (s *Server) streamAction(status int, act func(*stream.Stream)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, _ string) error {
		str, err := s.stream(r)
		if err != nil {
			return err
		}
		if act != nil {
			act(str)
		}
		writeJSON(w, status, s.view(str.Name()))
		return nil
	}
}

// ObjectView is one object of a stream with its backfill status.
type ObjectView struct {
	Object     string `json:"object"`
	Schema     string `json:"schema"`
	Table      string `json:"table"`
	Status     string `json:"status"` // "-" when none
	Reason     string `json:"reason,omitempty"`
	Loaded     bool   `json:"loaded"`
	BackfillID int64  `json:"backfill_id,omitempty"`
	// LoadedBy is, when the latest backfill was stopped, the earlier one
	// whose load of the whole table still stands (see stream.LoadedBy).
	LoadedBy int64        `json:"loaded_by,omitempty"`
	Events7d int64        `json:"events_7d"`
	Loaded7d int64        `json:"events_loaded_7d"`
	Bytes30d int64        `json:"bytes_30d"`
	Columns  []ColumnView `json:"columns"`
}

func (s *Server) listObjects(w http.ResponseWriter, r *http.Request, _ string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	objs, err := s.st.ListObjects(r.Context(), str.Name())
	if err != nil {
		return err
	}
	now := s.now().UTC()
	week, err := s.st.SumCountersByObject(r.Context(), str.Name(), now.AddDate(0, 0, -6))
	if err != nil {
		return err
	}
	month, err := s.st.SumCountersByObject(r.Context(), str.Name(), now.AddDate(0, 0, -29))
	if err != nil {
		return err
	}
	out := make([]ObjectView, 0, len(objs))
	for _, o := range objs {
		v := ObjectView{Object: config.FormatTable(change.TableID{Schema: o.Schema, Name: o.Table}), Schema: o.Schema, Table: o.Table, Status: o.Status, Reason: o.Reason,
			Loaded: o.Loaded, BackfillID: o.BackfillID, Columns: convert(o.Columns, columnView)}
		if v.Status == "" {
			v.Status = "-"
		}
		if o.Status == stream.StatusStopped {
			history, err := s.st.ListBackfills(r.Context(), store.BackfillFilter{Stream: o.Stream, Schema: o.Schema, Table: o.Table})
			if err != nil {
				return err
			}
			v.LoadedBy = stream.LoadedBy(history)
		}
		name := store.ObjectName{Schema: o.Schema, Table: o.Table}
		v.Events7d, v.Loaded7d, v.Bytes30d = week[name].EventsProcessed, week[name].EventsLoaded, month[name].BytesProcessed
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// ObjectsRequest names objects of a stream.
type ObjectsRequest struct {
	Objects []string `json:"objects"`
}

// InitiateRequest names objects to backfill, with the backfills' options.
type InitiateRequest struct {
	Objects []string `json:"objects"`
	// SampleRows reads only about the first N rows of each object in key
	// order and leaves the rest of its destination table alone.
	SampleRows int64 `json:"sample_rows,omitempty"`
	// StartAt keeps the backfills pending until then.
	StartAt *time.Time `json:"start_at,omitempty"`
	// RunAt is StartAt's deprecated alias: "run" names several backfills
	// initiated as one.
	RunAt *time.Time `json:"run_at,omitempty"`
	// RowsPerSecond limits each backfill's reads (0: the stream's limit).
	RowsPerSecond float64 `json:"rows_per_second,omitempty"`
	// Filter backfills only the source rows matching this condition on
	// the table's columns (the form package rowfilter accepts).
	Filter string `json:"filter,omitempty"`
	// Columns backfills only these columns (the key is always read) of
	// rows the destination holds, leaving its other columns alone.
	Columns []string `json:"columns,omitempty"`
	// AsOneRun makes the objects' backfills one run: one id (each
	// backfill's run_id), completed when every one is.
	AsOneRun bool `json:"as_one_run,omitempty"`
}

// startAt is the start time under either name; both must agree.
func (req InitiateRequest) startAt() (*time.Time, error) {
	switch {
	case req.RunAt == nil:
		return req.StartAt, nil
	case req.StartAt == nil:
		return req.RunAt, nil
	case !req.StartAt.Equal(*req.RunAt):
		return nil, badRequest("start_at %s and run_at %s differ: send start_at only (run_at is its deprecated alias)",
			req.StartAt.Format(time.RFC3339), req.RunAt.Format(time.RFC3339))
	}
	return req.StartAt, nil
}

func (s *Server) initiate(w http.ResponseWriter, r *http.Request, who string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	var req InitiateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	// A filter or a column subset chooses which rows and columns are
	// overwritten: it is the admin's to decide.
	if req.Filter != "" || req.Columns != nil {
		if err := callerOf(r).require(config.RoleAdmin, "a backfill with a filter or columns"); err != nil {
			return err
		}
	}
	ids, err := parseObjects(req.Objects)
	if err != nil {
		return err
	}
	if err := s.checkObjects(r.Context(), str, ids); err != nil {
		return err
	}
	start, err := req.startAt()
	if err != nil {
		return err
	}
	opts := stream.BackfillOptions{SampleRows: req.SampleRows, RunAt: start, RowsPerSecond: req.RowsPerSecond,
		Filter: req.Filter, Columns: req.Columns, AsOneRun: req.AsOneRun}
	recs, err := str.InitiateWith(r.Context(), ids, who, opts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, backfillViews(recs))
	return nil
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request, _ string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	var req ObjectsRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	ids, err := parseObjects(req.Objects)
	if err != nil {
		return err
	}
	if err := s.checkObjects(r.Context(), str, ids); err != nil {
		return err
	}
	if err := str.StopBackfills(r.Context(), ids); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"stopped": req.Objects})
	return nil
}

// estimate sizes objects before a backfill: ?object= repeated, none for
// every object of the stream.
func (s *Server) estimate(w http.ResponseWriter, r *http.Request, _ string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	for k := range r.URL.Query() {
		if k != "object" {
			return badRequest("unknown parameter %q: name objects with object=schema.table, repeated", k)
		}
	}
	var ids []change.TableID
	if names := r.URL.Query()["object"]; len(names) > 0 {
		if ids, err = parseObjects(names); err != nil {
			return err
		}
		if err := s.checkObjects(r.Context(), str, ids); err != nil {
			return err
		}
	}
	est, err := str.Estimate(r.Context(), ids)
	if err != nil {
		return &Error{Status: http.StatusBadGateway, Code: "source_unavailable", Message: err.Error() + ": check that the source is reachable (tidemark doctor)"}
	}
	writeJSON(w, http.StatusOK, estimateView(est))
	return nil
}

// VerifyRequest selects objects (none: all) and the range size.
type VerifyRequest struct {
	Objects   []string `json:"objects"`
	ChunkSize int      `json:"chunk_size"`
	// Repair re-backfills the key ranges found differing, as one backfill
	// per object (started by "repair"), named in each object's result.
	Repair bool `json:"repair,omitempty"`
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request, _ string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	var req VerifyRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	if req.ChunkSize < 0 || req.ChunkSize > 1_000_000 {
		return badRequest("chunk_size %d is out of range: use 1 to 1000000, or 0 for the stream's chunk size", req.ChunkSize)
	}
	ids, err := parseObjects(req.Objects)
	if len(req.Objects) == 0 {
		ids, err = nil, nil
	}
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		if err := s.checkObjects(r.Context(), str, ids); err != nil {
			return err
		}
	}
	checks, err := str.Verify(r.Context(), ids, req.ChunkSize)
	if err != nil {
		return err
	}
	if req.Repair {
		if checks, err = str.Repair(r.Context(), checks); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, convert(checks, checkView))
	return nil
}

func (s *Server) listBackfills(w http.ResponseWriter, r *http.Request, _ string) error {
	q := r.URL.Query()
	f := store.BackfillFilter{Stream: q.Get("stream"), Status: q.Get("status"), StartedBy: q.Get("started_by")}
	if f.Status != "" && !store.ValidStatus(f.Status) {
		return badRequest("status %q: use pending, active, completed, stopped or failed", f.Status)
	}
	if obj := q.Get("object"); obj != "" {
		ids, err := parseObjects([]string{obj})
		if err != nil {
			return err
		}
		f.Schema, f.Table = ids[0].Schema, ids[0].Name
	}
	var err error
	if f.Since, err = parseTime("since", q.Get("since")); err != nil {
		return err
	}
	if f.Until, err = parseTime("until", q.Get("until")); err != nil {
		return err
	}
	if l := q.Get("limit"); l != "" {
		if f.Limit, err = strconv.Atoi(l); err != nil || f.Limit < 1 || f.Limit > 100000 {
			return badRequest("limit %q: use a number from 1 to 100000", l)
		}
	}
	recs, err := s.st.ListBackfills(r.Context(), f)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		// Nothing of a stream or object that does not exist, rather than
		// an empty list that reads as "none yet".
		if err := s.checkListed(r.Context(), f); err != nil {
			return err
		}
		recs = []store.Backfill{}
	}
	writeJSON(w, http.StatusOK, backfillViews(recs))
	return nil
}

// getBackfillRecord is backfill id's record, a 404 naming it when there is
// none.
func (s *Server) getBackfillRecord(ctx context.Context, id int64) (store.Backfill, error) {
	rec, err := s.st.GetBackfill(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return rec, unknownID("backfill", id, "`tidemark backfill list` lists them")
	}
	return rec, err
}

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, badRequest("%s %q is not a time: use RFC 3339, e.g. 2026-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// RateRequest changes a pending or active backfill's read limit.
type RateRequest struct {
	// RowsPerSecond is the new limit; 0 goes back to the stream's.
	RowsPerSecond *float64 `json:"rows_per_second"`
}

func (s *Server) setRate(w http.ResponseWriter, r *http.Request, _ string) error {
	id, err := pathID(r, "backfill")
	if err != nil {
		return err
	}
	var req RateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.RowsPerSecond == nil {
		return badRequest("send {\"rows_per_second\": N}: the new limit, or 0 for the stream's")
	}
	rec, err := s.getBackfillRecord(r.Context(), id)
	if err != nil {
		return err
	}
	str, err := s.streamNamed(rec.Stream)
	if err != nil {
		return err
	}
	rec, err = str.SetRowsPerSecond(r.Context(), id, *req.RowsPerSecond)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, backfillView(rec))
	return nil
}

func (s *Server) getBackfill(w http.ResponseWriter, r *http.Request, _ string) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return badRequest("backfill id %q is not a positive number", r.PathValue("id"))
	}
	rec, err := s.getBackfillRecord(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, backfillView(rec))
	return nil
}

// events streams backfill and stream-state changes as server-sent events.
func (s *Server) events(w http.ResponseWriter, r *http.Request, _ string) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("response writer cannot stream")
	}
	filter := r.URL.Query().Get("stream")
	if filter != "" {
		if _, err := s.streamNamed(filter); err != nil {
			return err
		}
	}
	merged := make(chan any, 256)
	for _, n := range s.names {
		if filter != "" && filter != n {
			continue
		}
		ch, cancel := s.streams[n].Subscribe()
		defer cancel()
		go fanout.Forward(r.Context(), ch, merged)
	}
	if s.batch != nil && filter == "" {
		ch, cancel := s.batch.Subscribe()
		defer cancel()
		go fanout.Forward(r.Context(), ch, merged)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	// The stream lasts: the write timeout bounds each event, not the whole.
	rc := http.NewResponseController(w)
	for {
		select {
		case <-r.Context().Done():
			return nil
		case ev := <-merged:
			if s.timeouts.Write > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(s.timeouts.Write))
			}
			for _, v := range eventViews(ev) {
				data, _ := json.Marshal(v)
				fmt.Fprintf(w, "data: %s\n\n", data)
			}
			flusher.Flush()
		}
	}
}
