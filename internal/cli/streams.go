package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/doctor"
)

func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.rawOut())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (g *globals) table() *tabwriter.Writer {
	return tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
}

func streamsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "streams",
		Short: "List streams and their state",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			var out []api.StreamView
			if err := g.client().do(c.Context(), "GET", "/api/v1/streams", nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "STREAM\tSTATE\tSOURCE\tDESTINATION\tWAL RETAINED\tREASON")
			for _, s := range out {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.State, s.Source.Type, s.Destination.Type, bytesText(s.RetainedWALBytes), cell(s.Reason))
			}
			return tw.Flush()
		},
	}
}

func objectsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "objects STREAM",
		Short: "List a stream's objects with their backfill status",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			var out []api.ObjectView
			if err := g.client().do(c.Context(), "GET", "/api/v1/streams/"+url.PathEscape(args[0])+"/objects", nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "OBJECT\tSTATUS\tLOADED\tEVENTS 7D\tBYTES 30D\tCOLUMNS\tREASON")
			for _, o := range out {
				loaded := "-"
				switch {
				case o.LoadedBy != 0 && !o.Loaded:
					loaded = fmt.Sprintf("by backfill %d", o.LoadedBy)
				case o.BackfillID != 0:
					loaded = yesNo(o.Loaded)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", cell(o.Object), o.Status, loaded, thousands(o.Events7d), bytesText(o.Bytes30d), len(o.Columns), cell(o.Reason))
			}
			return tw.Flush()
		},
	}
}

func streamCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "stream", Short: "Pause, resume or reset a stream"}
	for _, verb := range []string{"pause", "resume", "reset"} {
		c.AddCommand(&cobra.Command{
			Use:   verb + " STREAM",
			Short: streamVerbHelp[verb],
			Args:  usageArgs(1, 1),
			RunE: func(c *cobra.Command, args []string) error {
				var out api.StreamView
				if err := g.client().do(c.Context(), "POST", "/api/v1/streams/"+url.PathEscape(args[0])+"/"+verb, nil, &out); err != nil {
					return err
				}
				if g.json {
					return g.printJSON(out)
				}
				fmt.Fprintf(g.stdout, "%s: %s requested\n", out.Name, verb)
				return nil
			},
		})
	}
	return c
}

var streamVerbHelp = map[string]string{
	"pause":  "Pause a stream (object statuses are kept; backfills continue on resume)",
	"resume": "Resume a paused or failed stream",
	"reset":  "Recover a stream whose replication slot was lost: re-create the slot and backfill every object",
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// bytesText renders a byte count in binary units, as tidemark doctor does.
func bytesText(n int64) string { return doctor.BytesText(n) }
