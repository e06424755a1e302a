package cli

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
)

func batchWaitCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "wait ID",
		Short: "Follow a batch backfill started elsewhere until it ends",
		Long: `Follow a batch backfill started elsewhere (another terminal, the console,
the API) until it ends, as "batch backfill --wait" does: on a terminal a
line for the backfill and a bar per concurrency group, otherwise a line per
instance that ends, with --json a JSON line per event. A backfill that has
already ended is shown as it ended.

Exits 0 when the backfill succeeded, 1 when it failed, was stopped or is
blocked, 2 when there is no backfill ID.`,
		Example: "  tidemark batch wait 7\n  tidemark batch wait 7 --json",
		Args:    usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			// Subscribed first, so that no event after the read is missed.
			es, err := g.client().subscribe(c.Context(), "")
			if err != nil {
				return err
			}
			defer es.Close()
			var b api.BatchBackfillView
			if err := g.client().do(c.Context(), "GET", "/api/v1/batch/backfills/"+url.PathEscape(args[0]), nil, &b); err != nil {
				return err
			}
			if !g.json {
				fmt.Fprintf(g.stdout, "batch backfill %d %q of %s: %s\n", b.ID, b.Name, b.Task, stateCounts(b))
			}
			return g.followBatch(c.Context(), es, b)
		},
	}
}
