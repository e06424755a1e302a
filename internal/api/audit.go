package api

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// Audit record kinds.
const (
	AuditStream = "stream" // a backfill of a stream's table (store.Backfill)
	AuditBatch  = "batch"  // a backfill of recurring tasks (store.BatchBackfill)
	// AuditAction is a request that changed something (store.Action):
	// listed with kind=action or kind=all.
	AuditAction = "action"
	auditAll    = "all"
)

// AuditRecord is one backfill of either kind, or one action, as the audit
// trail shows it.
type AuditRecord struct {
	Kind string `json:"kind"` // AuditStream or AuditBatch
	ID   int64  `json:"id"`   // the id among the backfills of its kind
	// Name is the batch backfill's name, or "stream/schema.table".
	Name   string `json:"name"`
	Object string `json:"object,omitempty"` // schema.table; stream backfills only
	Stream string `json:"stream,omitempty"` // stream backfills only
	Task   string `json:"task,omitempty"`   // the start task; batch backfills only
	// State is a stream backfill's status or a batch backfill's state.
	State      string     `json:"state"`
	StartedBy  string     `json:"started_by"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Error      string     `json:"error,omitempty"`
	// Options are a stream backfill's options or a batch backfill's
	// request, as compact JSON; left out when there are none.
	Options json.RawMessage `json:"options,omitempty"`
	// Figures are StreamFigures or BatchFigures, by Kind.
	Figures any `json:"figures"`
	// Lineage links a stream backfill to the batch backfills its changes
	// caused, and such a batch backfill to its causes (docs/lineage.md).
	Lineage []string `json:"lineage,omitempty"`
}

// StreamFigures are the progress counters of a stream backfill.
type StreamFigures struct {
	RowsRead    int64 `json:"rows_read"`
	RowsWritten int64 `json:"rows_written"`
	Bytes       int64 `json:"bytes"`
	Chunks      int64 `json:"chunks"`
}

// ActionFigures are what an action was answered: its HTTP status.
type ActionFigures struct {
	Status int `json:"status"`
}

// actionAudit is an action as the audit trail shows it: Name is the method
// and the path it was sent to, State "done" or "refused", StartedBy who
// sent it, Options its body.
func actionAudit(a store.Action) AuditRecord {
	method, _, _ := strings.Cut(a.Action, " ")
	state := "done"
	if a.Status >= 300 {
		state = "refused"
	}
	rec := AuditRecord{Kind: AuditAction, ID: a.ID, Name: method + " " + a.Path, State: state, StartedBy: a.Who,
		CreatedAt: a.At, Figures: ActionFigures{Status: a.Status}}
	if a.Detail != "" {
		if json.Valid([]byte(a.Detail)) {
			rec.Options = json.RawMessage(a.Detail)
		} else {
			rec.Options, _ = json.Marshal(a.Detail)
		}
	}
	return rec
}

// BatchFigures are a batch backfill's instance count and its instances
// counted by state.
type BatchFigures struct {
	Instances int            `json:"instances"`
	States    map[string]int `json:"states"`
}

func streamAudit(b store.Backfill) AuditRecord {
	obj := config.FormatTable(change.TableID{Schema: b.Schema, Name: b.Table})
	rec := AuditRecord{Kind: AuditStream, ID: b.ID, Name: b.Stream + "/" + obj, Object: obj, Stream: b.Stream,
		State: b.Status, StartedBy: b.StartedBy, CreatedAt: b.CreatedAt, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt,
		Error: b.Error, Figures: StreamFigures{RowsRead: b.RowsRead, RowsWritten: b.RowsWritten, Bytes: b.Bytes, Chunks: b.Chunks}}
	if len(b.Options) > 0 {
		// Decoded from JSON, the options encode again.
		rec.Options, _ = json.Marshal(b.Options)
	}
	return rec
}

func batchAudit(b store.BatchBackfill) AuditRecord {
	states := b.States
	if states == nil {
		states = map[string]int{}
	}
	rec := AuditRecord{Kind: AuditBatch, ID: b.ID, Name: b.Name, Task: b.Task, State: b.State, StartedBy: b.StartedBy,
		CreatedAt: b.CreatedAt, StartedAt: b.StartedAt, FinishedAt: b.FinishedAt, Error: b.Error,
		Figures: BatchFigures{Instances: b.Instances, States: states}}
	var buf bytes.Buffer
	if len(b.Request) > 0 && json.Compact(&buf, b.Request) == nil && buf.String() != "null" {
		rec.Options = buf.Bytes()
	}
	return rec
}

// newerAudit reports whether x comes before y in the audit trail: created
// later, or at the same time with a higher id.
func newerAudit(x, y AuditRecord) bool {
	if !x.CreatedAt.Equal(y.CreatedAt) {
		return x.CreatedAt.After(y.CreatedAt)
	}
	return x.ID > y.ID
}

// mergeAudit merges a and b, each ordered newest first, into one list
// newest first (by created_at, then id; a's record first on a full tie),
// of at most limit records when limit > 0. It never returns nil.
func mergeAudit(a, b []AuditRecord, limit int) []AuditRecord {
	n := len(a) + len(b)
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]AuditRecord, 0, n)
	i, j := 0, 0
	for len(out) < n {
		if j == len(b) || (i < len(a) && !newerAudit(b[j], a[i])) {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}

// The audit trail's stream statuses and batch states, as listed in messages.
const (
	auditStreamStates = "pending, active, completed, stopped or failed"
	auditBatchStates  = "waiting, running, succeeded, failed, stopped or blocked"
)

// auditParams are the query parameters GET /api/v1/audit accepts.
var auditParams = []string{"kind", "stream", "object", "task", "state", "started_by", "since", "until", "limit", "format"}

// auditQuery is a validated audit request.
type auditQuery struct {
	streams, batches, actions bool // which kinds to list
	stream                    store.BackfillFilter
	batch                     store.BatchBackfillFilter
	action                    store.ActionFilter
	limit                     int
	csv                       bool
}

// parseAuditQuery validates every parameter of an audit request. The
// checks run in a fixed order, so that of two bad parameters the same one
// is always named.
func parseAuditQuery(r *http.Request) (auditQuery, error) {
	q := r.URL.Query()
	if err := checkAuditParams(q); err != nil {
		return auditQuery{}, err
	}
	var a auditQuery
	state, startedBy := q.Get("state"), q.Get("started_by")
	if err := a.selectKinds(q.Get("kind"), q.Get("stream") != "" || q.Get("object") != "", q.Get("task") != ""); err != nil {
		return a, err
	}
	if err := a.selectKindsByState(state); err != nil {
		return a, err
	}
	a.stream = store.BackfillFilter{Stream: q.Get("stream"), Status: state, StartedBy: startedBy}
	a.batch = store.BatchBackfillFilter{Task: q.Get("task"), State: state, StartedBy: startedBy}
	if object := q.Get("object"); object != "" {
		ids, err := parseObjects([]string{object})
		if err != nil {
			return a, err
		}
		a.stream.Schema, a.stream.Table = ids[0].Schema, ids[0].Name
	}
	since, until, err := parseAuditPeriod(q.Get("since"), q.Get("until"))
	if err != nil {
		return a, err
	}
	a.stream.Since, a.stream.Until, a.batch.Since, a.batch.Until = since, until, since, until
	a.action = store.ActionFilter{Who: startedBy, Since: since, Until: until}
	if a.limit, err = intParam(r, "limit", store.DefaultBackfillLimit, 1, 100000); err != nil {
		return a, err
	}
	a.stream.Limit, a.batch.Limit, a.action.Limit = a.limit, a.limit, a.limit
	if a.csv, err = auditAsCSV(q.Get("format"), r.Header.Values("Accept")); err != nil {
		return a, err
	}
	return a, nil
}

// checkAuditParams refuses a parameter the audit trail does not know, or
// one given more than once.
func checkAuditParams(q url.Values) error {
	for name, vs := range q {
		if !slices.Contains(auditParams, name) {
			return badRequest("unknown parameter %q: the audit trail accepts %s", name, strings.Join(auditParams, ", "))
		}
		if len(vs) > 1 {
			return badRequest("parameter %q is given %d times: give it once", name, len(vs))
		}
	}
	return nil
}

// selectKinds chooses the kinds to list from the kind parameter and from
// the filters of one kind: stream and object (streamFilter) select stream
// backfills, task (taskFilter) batch backfills.
func (a *auditQuery) selectKinds(kind string, streamFilter, taskFilter bool) error {
	switch kind {
	case "":
		a.streams, a.batches = true, true
	case AuditStream:
		a.streams = true
	case AuditBatch:
		a.batches = true
	case AuditAction:
		a.actions = true
	case auditAll:
		a.streams, a.batches, a.actions = true, true, true
	default:
		return badRequest("kind %q: use stream or batch (or leave it out for both), action for the requests that changed something, or all", kind)
	}
	if kind == AuditAction && (streamFilter || taskFilter) {
		return badRequest("stream, object and task select backfills: leave them out with kind=action")
	}
	if streamFilter {
		a.actions = false
		if kind == AuditBatch {
			return badRequest("stream and object select stream backfills: leave them out with kind=batch")
		}
		if taskFilter {
			return badRequest("task selects batch backfills, stream and object stream backfills: give one or the other")
		}
		a.batches = false
	}
	if taskFilter {
		a.actions = false
		if kind == AuditStream {
			return badRequest("task selects batch backfills: leave it out with kind=stream")
		}
		a.streams = false
	}
	return nil
}

// selectKindsByState narrows the kinds selected to those state is a state
// of, and refuses a state of none of them.
func (a *auditQuery) selectKindsByState(state string) error {
	if state == "" {
		return nil
	}
	if a.actions && !a.streams && !a.batches {
		return badRequest("state selects backfills: leave it out with kind=action")
	}
	a.actions = false
	streamOK, batchOK := a.streams && store.ValidStatus(state), a.batches && store.ValidBatchState(state)
	switch {
	case streamOK || batchOK:
		// A state of one kind only (active, succeeded) lists that kind.
		a.streams, a.batches = streamOK, batchOK
		return nil
	case a.streams && a.batches:
		return badRequest("state %q: use %s (stream backfills) or %s (batch backfills)", state, auditStreamStates, auditBatchStates)
	case a.streams:
		return badRequest("state %q is not a stream backfill status: use %s", state, auditStreamStates)
	default:
		return badRequest("state %q is not a batch backfill state: use %s", state, auditBatchStates)
	}
}

// parseAuditPeriod parses the since and until parameters (either may be
// empty, for no bound) and refuses a period nothing could match.
func parseAuditPeriod(sinceParam, untilParam string) (since, until time.Time, err error) {
	if since, err = parseTime("since", sinceParam); err != nil {
		return since, until, err
	}
	if until, err = parseTime("until", untilParam); err != nil {
		return since, until, err
	}
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		return since, until, badRequest("until %s is not after since %s: nothing could match", untilParam, sinceParam)
	}
	return since, until, nil
}

// auditAsCSV reports whether the audit trail is answered as CSV: as the
// format parameter says, or without one as the Accept header prefers.
func auditAsCSV(format string, accept []string) (bool, error) {
	switch format {
	case "":
		return acceptsCSV(accept), nil
	case "json":
		return false, nil
	case "csv":
		return true, nil
	}
	return false, badRequest("format %q: use json or csv", format)
}

// acceptsCSV reports whether the Accept header prefers text/csv to
// application/json (no other type is answered): by quality, then by order.
func acceptsCSV(accept []string) bool {
	csvQ, jsonQ := -1.0, -1.0 // -1: not named
	first := ""
	for _, h := range accept {
		for part := range strings.SplitSeq(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || (mt != "text/csv" && mt != "application/json") {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(v, 64); err != nil || q < 0 {
					continue
				}
			}
			if first == "" && q > 0 {
				first = mt
			}
			if mt == "text/csv" {
				csvQ = max(csvQ, q)
			} else {
				jsonQ = max(jsonQ, q)
			}
		}
	}
	return csvQ > 0 && (csvQ > jsonQ || (csvQ == jsonQ && first == "text/csv"))
}

// audit lists the backfills of both kinds, and with kind=action or all the
// actions, newest first.
func (s *Server) audit(w http.ResponseWriter, r *http.Request, _ string) error {
	a, err := parseAuditQuery(r)
	if err != nil {
		return err
	}
	var streams, batches []AuditRecord
	if a.streams {
		recs, err := s.st.ListBackfills(r.Context(), a.stream)
		if err != nil {
			return err
		}
		for _, b := range recs {
			streams = append(streams, streamAudit(b))
		}
	}
	if a.batches {
		recs, err := s.st.ListBatchBackfills(r.Context(), a.batch)
		if err != nil {
			return err
		}
		for _, b := range recs {
			batches = append(batches, batchAudit(b))
		}
	}
	out := mergeAudit(streams, batches, a.limit)
	if a.actions {
		recs, err := s.st.ListActions(r.Context(), a.action)
		if err != nil {
			return err
		}
		actions := make([]AuditRecord, 0, len(recs))
		for _, act := range recs {
			actions = append(actions, actionAudit(act))
		}
		out = mergeAudit(out, actions, a.limit)
	}
	if len(out) == 0 && a.streams {
		// Nothing of a stream or object that does not exist, rather than
		// an empty trail that reads as "none yet".
		if err := s.checkListed(r.Context(), a.stream); err != nil {
			return err
		}
	}
	if !a.csv {
		if err := s.linkLineage(r.Context(), out); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	return writeAuditCSV(w, out)
}

// linkLineage fills the Lineage of the stream and batch backfills in recs
// from the proposals.
func (s *Server) linkLineage(ctx context.Context, recs []AuditRecord) error {
	ps, err := s.st.ListProposals(ctx, "", 100000)
	if err != nil || len(ps) == 0 {
		return err
	}
	caused := map[string][]string{}  // "stream/id" → what it caused
	causedBy := map[int64][]string{} // batch backfill id → its causes
	for _, p := range ps {
		what := fmt.Sprintf("proposal %d (%s) to re-run %s", p.ID, p.State, p.Task)
		if p.BatchBackfillID != 0 {
			what = fmt.Sprintf("batch backfill %d of %s (proposal %d)", p.BatchBackfillID, p.Task, p.ID)
		}
		for _, c := range p.Causes {
			k := fmt.Sprintf("%s/%d", c.Stream, c.BackfillID)
			caused[k] = append(caused[k], fmt.Sprintf("caused %s for %d cycles", what, len(p.Times)))
		}
		if p.BatchBackfillID != 0 {
			causedBy[p.BatchBackfillID] = causedByLines(p)
		}
	}
	for i := range recs {
		switch r := &recs[i]; r.Kind {
		case AuditStream:
			r.Lineage = caused[fmt.Sprintf("%s/%d", r.Stream, r.ID)]
		case AuditBatch:
			r.Lineage = causedBy[r.ID]
		}
	}
	return nil
}

// AuditCSVHeader is the header row of the audit trail as CSV.
var AuditCSVHeader = []string{"kind", "id", "name", "object", "stream", "task", "state", "started_by",
	"created_at", "started_at", "finished_at", "error", "options", "figures"}

// writeAuditCSV answers with recs as CSV, encoded in full first so that
// an error is still an error response.
func writeAuditCSV(w http.ResponseWriter, recs []AuditRecord) error {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	_ = cw.Write(AuditCSVHeader)
	for _, rec := range recs {
		figures, err := json.Marshal(rec.Figures)
		if err != nil {
			return fmt.Errorf("encode the figures of %s backfill %d: %w", rec.Kind, rec.ID, err)
		}
		row := []string{rec.Kind, strconv.FormatInt(rec.ID, 10), rec.Name, rec.Object, rec.Stream, rec.Task, rec.State, rec.StartedBy,
			csvTime(&rec.CreatedAt), csvTime(rec.StartedAt), csvTime(rec.FinishedAt), rec.Error, string(rec.Options), string(figures)}
		for i, cell := range row {
			row[i] = CSVCell(cell)
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("encode the audit trail as CSV: %w", err)
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="tidemark-audit.csv"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes()) // a client that went away gets nothing more
	return nil
}

// CSVCell neutralises a cell a spreadsheet would read as a formula: one
// starting with =, +, -, @, a tab or a carriage return gets a leading single
// quote (OWASP's advice against CSV injection). Names, reasons and options
// come from requests, task outputs and source tables, so every cell of the
// audit trail passes through it.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// csvTime is t in RFC 3339 (UTC, with its fraction), or "" for none.
func csvTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// causedByLines say what caused proposal p's batch backfill.
func causedByLines(p store.Proposal) []string {
	out := make([]string, 0, len(p.Causes))
	for _, c := range p.Causes {
		if c.BackfillID == 0 {
			out = append(out, fmt.Sprintf("caused by late data in %s of stream %s (proposal %d)", c.Object, c.Stream, p.ID))
		} else {
			out = append(out, fmt.Sprintf("caused by %s backfill %d of stream %s (proposal %d)", c.Object, c.BackfillID, c.Stream, p.ID))
		}
	}
	return slices.Compact(out)
}
