package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/lineage"
	"github.com/tidemark/tidemark/internal/store"
)

// WithLineage lets the API list, approve and dismiss the proposals w makes
// (docs/lineage.md).
func WithLineage(w *lineage.Watcher) Option { return func(s *Server) { s.lineage = w } }

func (s *Server) lineageRoutes() {
	s.handle("GET /api/v1/lineage/proposals", viewer, s.listProposals)
	s.handle("GET /api/v1/lineage/proposals/{id}", viewer, s.getProposal)
	s.handle("POST /api/v1/lineage/proposals/{id}/approve", operator, s.decideProposal)
	s.handle("POST /api/v1/lineage/proposals/{id}/dismiss", operator, s.decideProposal)
}

// ProposalView is a proposal to re-run a task's cycles whose rows
// backfills changed.
type ProposalView struct {
	store.Proposal
	// Cycles are the business dates (daily, weekly, monthly tasks) or
	// times (RFC 3339 in the task's zone) the proposal re-runs.
	Cycles []string `json:"cycles"`
	// Summary says it in a sentence.
	Summary string `json:"summary"`
}

func (s *Server) proposalView(p store.Proposal) ProposalView {
	v := ProposalView{Proposal: p, Cycles: []string{}}
	var t *dag.Task
	if s.batch != nil {
		t, _ = s.batch.Graph().Task(p.Task)
	}
	if t == nil {
		for _, c := range p.Times {
			v.Cycles = append(v.Cycles, c.Format(time.RFC3339))
		}
		v.Summary = fmt.Sprintf("re-run %s for %d cycles (the task is no longer configured)", p.Task, len(p.Times))
		return v
	}
	v.Cycles = businessTimes(t, p.Times)
	var causes []string
	for _, c := range p.Causes {
		if c.BackfillID == 0 {
			causes = append(causes, "late data in "+c.Object)
		} else {
			causes = append(causes, fmt.Sprintf("%s backfill #%d", c.Object, c.BackfillID))
		}
	}
	causes = slices.Compact(causes)
	what := p.Task
	if req, err := lineage.Request(t, p); err == nil && req.Scope.Mode == plan.ScopeList && req.Scope.Downstream != 0 {
		if n := len(s.batch.Graph().Descendants(t.ID, req.Scope.Downstream)); n > 0 {
			what = fmt.Sprintf("%s and its %d downstream task%s", p.Task, n, map[bool]string{true: "", false: "s"}[n == 1])
		}
	}
	v.Summary = fmt.Sprintf("%s changed %s: re-run %s for these %d %s", strings.Join(causes, ", "), strings.Join(v.Cycles, ", "), what, len(v.Cycles),
		map[bool]string{true: "dates", false: "cycles"}[t.Schedule.DayBased()])
	return v
}

func (s *Server) listProposals(w http.ResponseWriter, r *http.Request, _ string) error {
	state := r.URL.Query().Get("state")
	switch state {
	case "", store.ProposalPending, store.ProposalSubmitted, store.ProposalDismissed:
	default:
		return badRequest("state %q: use pending, submitted or dismissed", state)
	}
	ps, err := s.st.ListProposals(r.Context(), state, 0)
	if err != nil {
		return err
	}
	out := make([]ProposalView, 0, len(ps))
	for _, p := range ps {
		out = append(out, s.proposalView(p))
	}
	return writeList(w, out)
}

func (s *Server) getProposal(w http.ResponseWriter, r *http.Request, _ string) error {
	id, err := pathID(r, "proposal")
	if err != nil {
		return err
	}
	p, err := s.st.GetProposal(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return unknownID("proposal", id, "`tidemark lineage list` lists them")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.proposalView(p))
	return nil
}

// decideProposal approves (submits the batch backfill now) or dismisses a
// pending proposal; one already decided is a 409.
func (s *Server) decideProposal(w http.ResponseWriter, r *http.Request, who string) error {
	id, err := pathID(r, "proposal")
	if err != nil {
		return err
	}
	if s.lineage == nil {
		return &Error{Status: http.StatusNotFound, Code: "no_tasks", Message: "no recurring tasks are configured: proposals need tasks with on_change (docs/lineage.md)"}
	}
	decide := s.lineage.Approve
	if strings.HasSuffix(r.URL.Path, "/dismiss") {
		decide = s.lineage.Dismiss
	}
	p, err := decide(r.Context(), id, who)
	var reqErr *plan.RequestError
	var gone *lineage.TaskGoneError
	switch {
	case errors.As(err, &gone):
		return &Error{Status: http.StatusConflict, Code: "refused", Message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return unknownID("proposal", id, "`tidemark lineage list` lists them")
	case errors.Is(err, store.ErrProposalDecided):
		return &Error{Status: http.StatusConflict, Code: "refused", Message: err.Error()}
	case errors.As(err, &reqErr):
		return &Error{Status: http.StatusConflict, Code: "refused", Message: err.Error()}
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, s.proposalView(p))
	return nil
}
