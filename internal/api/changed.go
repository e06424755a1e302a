package api

import (
	"net/http"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/lineage"
	"github.com/tidemark/tidemark/internal/stream"
)

// maxChangedValues bounds the values listed per column; the count says
// how many there are.
const maxChangedValues = 1000

// ChangedDatesView is what a backfill changed in the destination, as the
// values of its table's date columns, and the cycles of the tasks that
// read those rows (docs/lineage.md).
type ChangedDatesView struct {
	BackfillID int64               `json:"backfill_id"`
	Stream     string              `json:"stream"`
	Object     string              `json:"object"`
	Columns    []ChangedColumnView `json:"columns"`
	Tasks      []AffectedTaskView  `json:"tasks"`
	// Handled: the backfill ended and its changes (if any) went to the
	// proposals of the tasks whose on_change acts on them.
	Handled   bool             `json:"handled"`
	Proposals []CausedProposal `json:"proposals"`
}

// CausedProposal is a proposal that holds a backfill's changes.
type CausedProposal struct {
	ID              int64    `json:"id"`
	Task            string   `json:"task"`
	State           string   `json:"state"`
	Cycles          []string `json:"cycles"`
	BatchBackfillID int64    `json:"batch_backfill_id,omitempty"`
}

// ChangedColumnView is the values one date column had or has in the rows
// the backfill changed: the first maxChangedValues, ascending, and how
// many there are.
type ChangedColumnView struct {
	Column string   `json:"column"`
	Values []string `json:"values"`
	Total  int      `json:"total"`
}

// AffectedTaskView is a reading task's cycles that hold changed rows:
// business dates (YYYY-MM-DD) for a daily, weekly or monthly task, else
// business times (RFC 3339 in the task's zone); the first
// maxChangedValues, and how many there are.
type AffectedTaskView struct {
	Task      string   `json:"task"`
	Column    string   `json:"column"`
	Timezone  string   `json:"timezone"`
	Instances []string `json:"instances"`
	Total     int      `json:"total"`
}

func (s *Server) changedDates(w http.ResponseWriter, r *http.Request, _ string) error {
	id, err := pathID(r, "backfill")
	if err != nil {
		return err
	}
	rec, err := s.getBackfillRecord(r.Context(), id)
	if err != nil {
		return err
	}
	ds, err := s.st.ChangedDates(r.Context(), rec.Stream, id)
	if err != nil {
		return err
	}
	v := ChangedDatesView{BackfillID: id, Stream: rec.Stream, Object: rec.Schema + "." + rec.Table, Columns: []ChangedColumnView{}, Tasks: []AffectedTaskView{}}
	byColumn := map[string]int{}
	for _, d := range ds {
		v.Object = d.Object // quoted as the configuration writes it
		i, ok := byColumn[d.Column]
		if !ok {
			i = len(v.Columns)
			byColumn[d.Column] = i
			v.Columns = append(v.Columns, ChangedColumnView{Column: d.Column, Values: []string{}})
		}
		c := &v.Columns[i]
		if c.Total < maxChangedValues {
			c.Values = append(c.Values, d.Value)
		}
		c.Total++
	}
	if s.batch != nil && len(ds) > 0 {
		g := s.batch.Graph()
		affected, err := lineage.Affected(g.Tasks(), rec.Stream, ds)
		if err != nil {
			return err
		}
		for _, a := range affected {
			t, _ := g.Lookup(a.Task)
			v.Tasks = append(v.Tasks, AffectedTaskView{Task: a.Task, Column: a.Column, Timezone: t.Schedule.Location.String(),
				Instances: businessTimes(t, a.Times[:min(len(a.Times), maxChangedValues)]), Total: len(a.Times)})
		}
	}
	ps, handled, err := s.st.ProposalsCausedBy(r.Context(), id)
	if err != nil {
		return err
	}
	v.Handled, v.Proposals = handled || stream.RunEnded(rec.Status) && len(ds) == 0, []CausedProposal{}
	for _, p := range ps {
		pv := s.proposalView(p)
		v.Proposals = append(v.Proposals, CausedProposal{ID: p.ID, Task: p.Task, State: p.State, Cycles: pv.Cycles, BatchBackfillID: p.BatchBackfillID})
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// businessTimes writes cycles as a person names them for task t.
func businessTimes(t *dag.Task, times []time.Time) []string {
	out := make([]string, len(times))
	for i, c := range times {
		if t.Schedule.DayBased() {
			out[i] = calendar.DateOf(c.In(t.Schedule.Location)).String()
		} else {
			out[i] = c.In(t.Schedule.Location).Format(time.RFC3339)
		}
	}
	return out
}
