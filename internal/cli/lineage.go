package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
)

func lineageCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "lineage", Short: "Proposals to re-run tasks' past cycles whose rows backfills changed: list, show, approve, dismiss",
		Long: `When a backfill or repair changes rows of dates a task has run, and the task's
on_change is propose or run, tidemark proposes to re-run those cycles (run:
it submits the batch backfill itself once the changes settle). See
docs/lineage.md.`}
	var state string
	list := &cobra.Command{
		Use:   "list",
		Short: "List proposals, newest first",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			switch state {
			case "", "pending", "submitted", "dismissed":
			default:
				return &exitError{code: ExitUsage, err: fmt.Errorf("--state %q: use pending, submitted or dismissed", state)}
			}
			var out []api.ProposalView
			path := "/api/v1/lineage/proposals"
			if state != "" {
				path += "?state=" + url.QueryEscape(state)
			}
			if err := g.client().do(c.Context(), "GET", path, nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "ID\tTASK\tSTATE\tCYCLES\tBATCH BACKFILL\tSUMMARY")
			for _, p := range out {
				batch := "-"
				if p.BatchBackfillID != 0 {
					batch = strconv.FormatInt(p.BatchBackfillID, 10)
				}
				summary := p.Summary
				if p.Note != "" {
					summary += " (" + p.Note + ")"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", p.ID, cell(p.Task), p.State, len(p.Cycles), batch, cell(summary))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&state, "state", "", "only proposals in this state: pending, submitted or dismissed")
	c.AddCommand(list, proposalCmd(g, "show", "GET", "", "Show a proposal"),
		proposalCmd(g, "approve", "POST", "/approve", "Submit a pending proposal's batch backfill now (operator)"),
		proposalCmd(g, "dismiss", "POST", "/dismiss", "Close a pending proposal without running it (operator)"))
	return c
}

func proposalCmd(g *globals, verb, method, suffix, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if id, err := strconv.ParseInt(args[0], 10, 64); err != nil || id <= 0 {
				return &exitError{code: ExitUsage, err: fmt.Errorf("ID %q: give a proposal's id, a positive number (`tidemark lineage list` shows them)", args[0])}
			}
			var p api.ProposalView
			if err := g.client().do(c.Context(), method, "/api/v1/lineage/proposals/"+args[0]+suffix, nil, &p); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(p)
			}
			fmt.Fprintf(g.stdout, "proposal %d of %s: %s\n%s\n", p.ID, cell(p.Task), p.State, cell(p.Summary))
			if p.BatchBackfillID != 0 {
				fmt.Fprintf(g.stdout, "batch backfill %d (tidemark batch show %d)\n", p.BatchBackfillID, p.BatchBackfillID)
			}
			if p.Note != "" {
				fmt.Fprintf(g.stdout, "note: %s\n", cell(p.Note))
			}
			_, err := fmt.Fprintf(g.stdout, "cycles: %s\n", strings.Join(p.Cycles, ", "))
			return err
		},
	}
}
