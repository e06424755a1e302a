package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
)

func verifyCmd(g *globals) *cobra.Command {
	var chunk int
	var repair bool
	c := &cobra.Command{
		Use:   "verify STREAM [OBJECT...]",
		Short: "Compare source and destination row counts and checksums per object and key range",
		Long: `Compare source and destination row counts and checksums per object and key
range. Each range is compared at the same point of the live stream, so
ongoing changes do not show as differences. A PostgreSQL source and
destination each checksum a range on their own server; rows are read for a
range the checksums cannot settle, and after live changes touched one for
the ranges after it until one is read without (see docs/backfill.md). Exits 3 when
a range differs.

--repair re-backfills the key ranges found differing: one backfill per
object (started by "repair"), whose id is printed; it still exits 3, as the
differences were found (run verify again once the repair has completed).`,
		Args: usageArgs(1, -1),
		RunE: func(c *cobra.Command, args []string) error {
			var out []api.CheckView
			req := api.VerifyRequest{Objects: args[1:], ChunkSize: chunk, Repair: repair}
			if err := g.client().do(c.Context(), "POST", "/api/v1/streams/"+url.PathEscape(args[0])+"/verify", req, &out); err != nil {
				return err
			}
			ok := true
			for _, o := range out {
				ok = ok && o.Match && o.Error == ""
			}
			if g.json {
				if err := g.printJSON(out); err != nil {
					return err
				}
			} else {
				printChecks(g, out)
			}
			if !ok {
				return &exitError{code: ExitMismatch, err: fmt.Errorf("source and destination differ")}
			}
			return nil
		},
	}
	c.Flags().IntVar(&chunk, "chunk-size", 0, "rows per compared range (default: the stream's chunk size)")
	c.Flags().BoolVar(&repair, "repair", false, "re-backfill the differing key ranges (one backfill per object)")
	return c
}

func printChecks(g *globals, out []api.CheckView) {
	tw := g.table()
	fmt.Fprintln(tw, "OBJECT\tRESULT\tSOURCE ROWS\tDESTINATION ROWS\tRANGES\tDIFFERING RANGES")
	for _, o := range out {
		result := "ok"
		if !o.Match || o.Error != "" {
			result = "DIFFERS"
		}
		var bad []string
		for _, r := range o.Ranges {
			if !r.Match {
				keys := make([]string, len(r.DifferingKeys))
				for i, k := range r.DifferingKeys {
					keys[i] = "(" + strings.Join(k, ",") + ")"
				}
				bad = append(bad, fmt.Sprintf("(%s, %s] keys %s", strings.Join(r.Low, ","), strings.Join(r.High, ","), strings.Join(keys, " ")))
			}
		}
		if o.Error != "" {
			bad = append(bad, o.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(o.Object), result, thousands(int64(o.SourceRows)), thousands(int64(o.DestRows)), thousands(int64(len(o.Ranges))), cell(strings.Join(bad, "; ")))
	}
	tw.Flush()
	for _, o := range out {
		if o.Repair != nil {
			fmt.Fprintf(g.stdout, "repair of %s: backfill %d, %s\n", o.Object, o.Repair.ID, o.Repair.Status)
		}
	}
}
