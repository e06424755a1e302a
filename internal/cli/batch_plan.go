package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/api"
)

// printPlan prints a preview: the plan's figures, its groups and notes,
// and a row per instance, numbered once, by date (the API lists them so).
// The scheduled time is shown in the user's zone too unless it reads the
// same as in the task's for every instance (both UTC, say).
func printPlan(g *globals, p api.PlanView) error {
	fmt.Fprintf(g.stdout, "plan %q: %d instance(s), %d task(s), %d date(s), %d group(s); starts at %s\n",
		p.Name, p.Count, len(p.Tasks), len(p.Dates), len(p.Groups), p.StartAt.Local().Format(time.RFC3339))
	for i, grp := range p.Groups {
		fmt.Fprintf(g.stdout, "  group %d: %s\n", i+1, strings.Join(grp, ", "))
	}
	if p.Skipped > 0 {
		fmt.Fprintf(g.stdout, "  left out by the succeeded/running policies: %d\n", p.Skipped)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(g.stdout, "  note: %s\n", w)
	}
	both := false
	for _, in := range p.Instances {
		both = both || in.ScheduledUser != in.ScheduledTask
	}
	tw := g.table()
	head := "#\tGROUP\tTASK\tBIZ TIME\tSCHEDULED"
	if both {
		head += fmt.Sprintf("\tSCHEDULED (%s)", p.Timezone)
	}
	fmt.Fprintln(tw, head+"\tMODE\tWAITS FOR")
	for _, in := range p.Instances {
		waits := make([]string, len(in.WaitsFor))
		for i, d := range in.WaitsFor {
			waits[i] = "#" + strconv.Itoa(d)
		}
		if in.Seq > 0 {
			waits = append(waits, fmt.Sprintf("group %d date %d", in.Group, in.Seq))
		}
		row := fmt.Sprintf("%d\t%d\t%s\t%s\t%s", in.Index, in.Group, in.Task, in.BizTime, in.ScheduledTask)
		if both {
			row += "\t" + in.ScheduledUser
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", row, in.Mode, dash(strings.Join(waits, " ")))
	}
	if p.Truncated {
		fmt.Fprintf(tw, "…\t(%d more; --limit or --json)\n", p.Count-len(p.Instances))
	}
	return tw.Flush()
}
