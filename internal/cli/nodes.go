package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
)

func nodesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "List the cluster's nodes and what each runs (docs/cluster.md)",
		Long: `List the nodes sharing the daemon's PostgreSQL metadata store: each
node's host, pid, API address, last heartbeat, whether it is live, and the
streams it runs (and "batch" for the node leading the batch engine).
A daemon without a cluster section answers that it runs alone (exit 2).`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			var out api.ClusterView
			if err := g.client().do(c.Context(), "GET", "/api/v1/cluster", nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			runs := map[string][]string{}
			for _, l := range out.Leases {
				if l.Live {
					runs[l.Node] = append(runs[l.Node], fmt.Sprintf("%s (epoch %d)", strings.TrimPrefix(l.Name, "stream:"), l.Epoch))
				}
			}
			tw := g.table()
			fmt.Fprintln(tw, "NODE\tHOST\tPID\tAPI\tLIVE\tHEARTBEAT\tRUNS")
			for _, n := range out.Nodes {
				sort.Strings(runs[n.Name])
				name := n.Name
				if name == out.Node {
					name += " (this)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", cell(name), cell(n.Host), n.PID, cell(n.API), yesNo(n.Live),
					n.Heartbeat.Local().Format(time.DateTime), cell(strings.Join(runs[n.Name], ", ")))
			}
			return tw.Flush()
		},
	}
}
