package api

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/store"
)

// exportNodes writes the backfill's task list as CSV: each task with its
// instance count, whether it was selected, and a note when its instances
// do not run (a task only there to connect selected ones, which dry-runs;
// a dry-run or paused task).
func (s *Server) exportNodes(w http.ResponseWriter, r *http.Request, _ string) error {
	e, id, err := s.engineAndID(r, "backfill")
	if err != nil {
		return err
	}
	nodes := map[string]*exportedNode{}
	var order []string
	var after int64
	for {
		page, err := s.st.ListBatchInstances(r.Context(), store.BatchInstanceFilter{BackfillID: id, AfterID: after, Limit: 10000})
		if err != nil {
			return err
		}
		for _, in := range page {
			n := nodes[in.Task]
			if n == nil {
				n = &exportedNode{}
				nodes[in.Task] = n
				order = append(order, in.Task)
			}
			n.add(in)
		}
		if len(page) < 10000 {
			break
		}
		after = page[len(page)-1].ID
	}
	if len(order) == 0 {
		if _, err := s.st.GetBatchBackfill(r.Context(), id); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"backfill-%d-nodes.csv\"", id))
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"id", "name", "project", "owner", "output", "type", "schedule", "instances", "selected", "note"})
	for _, tid := range order {
		n := nodes[tid]
		row := []string{tid, "", "", "", "", "", "", strconv.Itoa(n.count)}
		if t, ok := e.Graph().Task(tid); ok {
			row = []string{t.ID, t.Name, t.Project, t.Owner, t.Output, t.Type, t.Schedule.String(), strconv.Itoa(n.count)}
		}
		row = append(row, n.cells()...)
		for i, cell := range row {
			row[i] = CSVCell(cell)
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// exportedNode is a task of an exported node list.
type exportedNode struct {
	count    int
	selected bool   // some instance is not only there to connect others
	runs     bool   // some instance runs
	note     string // the first instance that does not run: its mode and reason
}

func (n *exportedNode) add(in store.BatchInstance) {
	n.count++
	n.selected = n.selected || in.Mode != plan.ModeDryRun || !plan.NotSelected(in.Reason)
	n.runs = n.runs || in.Mode == plan.ModeRun
	if n.note == "" && in.Mode != plan.ModeRun {
		n.note = in.Mode + ": " + in.Reason
	}
}

// cells are the selected and note columns.
func (n *exportedNode) cells() []string {
	selected, note := "yes", n.note
	if !n.selected {
		selected = "no"
	}
	if n.runs {
		note = ""
	}
	return []string{selected, note}
}
