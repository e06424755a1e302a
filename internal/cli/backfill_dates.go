package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
)

// maxListedInstances bounds the cycles a task's line lists; the count
// says how many there are.
const maxListedInstances = 20

func backfillDatesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "dates ID",
		Short: "Show the dates whose rows a backfill changed, and the cycles of the tasks reading them",
		Long: `Show the values of the date columns tasks read (tasks[].reads) in the rows
backfill ID inserted, deleted or changed in the destination, and for each
task reading them the cycles that hold those rows (docs/lineage.md). A
backfill into an event destination counts every row it wrote.`,
		Args: usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if id, err := strconv.ParseInt(args[0], 10, 64); err != nil || id <= 0 {
				return &exitError{code: ExitUsage, err: fmt.Errorf("ID %q: give a backfill's id, a positive number (`tidemark backfill list` shows them)", args[0])}
			}
			var v api.ChangedDatesView
			if err := g.client().do(c.Context(), "GET", "/api/v1/backfills/"+args[0]+"/changed-dates", nil, &v); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(v)
			}
			return g.printChangedDates(v)
		},
	}
}

func (g *globals) printChangedDates(v api.ChangedDatesView) error {
	if len(v.Columns) == 0 {
		_, err := fmt.Fprintf(g.stdout, "backfill %d of %s changed no row of a date a task reads\n", v.BackfillID, v.Object)
		return err
	}
	tw := g.table()
	fmt.Fprintf(tw, "backfill %d of %s changed rows of:\n", v.BackfillID, v.Object)
	fmt.Fprintln(tw, "COLUMN\tVALUES\tCHANGED")
	for _, c := range v.Columns {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Column, c.Total, listed(c.Values, c.Total))
	}
	if len(v.Tasks) > 0 {
		fmt.Fprintln(tw, "\nTASK\tBY\tCYCLES\tHOLDING THEM")
		for _, t := range v.Tasks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.Task, t.Column, t.Total, listed(t.Instances, t.Total))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range v.Proposals {
		what := fmt.Sprintf("proposal %d (%s) to re-run %s", p.ID, p.State, p.Task)
		if p.BatchBackfillID != 0 {
			what = fmt.Sprintf("batch backfill #%d of %s (proposal %d)", p.BatchBackfillID, p.Task, p.ID)
		}
		fmt.Fprintf(g.stdout, "caused %s for %d %s: %s\n", what, len(p.Cycles), pluralWord(len(p.Cycles), "cycle", "cycles"), strings.Join(p.Cycles, ", "))
	}
	return nil
}

// listed is the first values of a list of total, and how many more.
func listed(vs []string, total int) string {
	shown := vs[:min(len(vs), maxListedInstances)]
	s := strings.Join(shown, ", ")
	if more := total - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
