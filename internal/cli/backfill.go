package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

func backfillCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "backfill", Short: "Backfills (copies of tables) of streams' objects: initiate, wait, stop, estimate, list, set-rate, show-run, stop-run, dates",
		Long: `Backfills of streams' objects. A backfill is one copy of one table; a run is
several backfills initiated together (--as-one-run); a batch backfill, of
recurring tasks, is "tidemark batch" (docs/glossary.md).`}
	c.AddCommand(backfillInitiateCmd(g), &cobra.Command{
		Use:   "stop STREAM OBJECT...",
		Short: "Stop the backfills of objects; refused for Completed, Stopped or Failed objects",
		Args:  usageArgs(2, -1),
		RunE: func(c *cobra.Command, args []string) error {
			err := g.client().do(c.Context(), "POST", "/api/v1/streams/"+url.PathEscape(args[0])+"/backfills/stop", api.ObjectsRequest{Objects: args[1:]}, nil)
			if err != nil {
				return err
			}
			if !g.json {
				fmt.Fprintf(g.stdout, "stopped %d object(s)\n", len(args)-1)
			}
			return nil
		},
	}, backfillListCmd(g), backfillEstimateCmd(g), backfillSetRateCmd(g), backfillShowRunCmd(g, "show-run"), backfillShowRunCmd(g, "run"), backfillStopRunCmd(g), backfillWaitCmd(g), backfillDatesCmd(g))
	return c
}

func backfillEstimateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "estimate STREAM [OBJECT...]",
		Short: "Rows, bytes and expected duration of backfilling objects (all when none named), before starting",
		Long: `Rows, bytes and expected duration of backfilling objects (every object of
the stream when none is named), before starting. Rows are counted exactly up
to 64 MB of table, else taken from the planner's statistics (run ANALYZE on
a large table never analyzed). The duration assumes the rate this stream's
recent completed backfills reached, capped by backfill.rows_per_second, with
backfill.max_concurrent backfills at once; it is unknown before the stream's
first completed backfill unless rows_per_second is set.`,
		Args: usageArgs(1, -1),
		RunE: func(c *cobra.Command, args []string) error {
			q := url.Values{"object": args[1:]}
			var est api.EstimateView
			if err := g.client().do(c.Context(), "GET", "/api/v1/streams/"+url.PathEscape(args[0])+"/estimate?"+q.Encode(), nil, &est); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(est)
			}
			tw := g.table()
			fmt.Fprintln(tw, "OBJECT\tROWS\tBYTES\tDURATION\tNOTE")
			for _, o := range est.Objects {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(o.Object), estimateRows(o.Rows, o.RowsExact), bytesText(o.Bytes), seconds(o.Seconds), cell(o.Error))
			}
			fmt.Fprintf(tw, "total\t%s\t%s\t%s\t\n", thousands(est.Rows), bytesText(est.Bytes), seconds(est.Seconds))
			if err := tw.Flush(); err != nil {
				return err
			}
			if est.RowsPerSecond > 0 {
				_, err := fmt.Fprintf(g.stdout, "rate: %s rows/s per backfill (%s)\n", thousands(int64(est.RowsPerSecond)), est.Basis)
				return err
			}
			_, err := fmt.Fprintf(g.stdout, "rate: %s\n", est.Basis)
			return err
		},
	}
}

func estimateRows(n int64, exact bool) string {
	switch {
	case n < 0:
		return "unknown"
	case exact:
		return thousands(n)
	}
	return "~" + thousands(n)
}

func seconds(s float64) string {
	if s <= 0 {
		return "unknown"
	}
	return durationText(time.Duration(s * float64(time.Second)))
}

func backfillInitiateCmd(g *globals) *cobra.Command {
	var wait bool
	var req api.InitiateRequest
	var at string
	c := &cobra.Command{
		Use:   "initiate STREAM OBJECT...",
		Short: "Initiate backfills of objects (schema.table); refused for Pending or Active objects",
		Long: `Initiate backfills of objects (schema.table); refused for Pending or Active objects.

With --wait, follow the backfills until each has ended (completed and
loaded, stopped or failed): on a terminal a line per object redrawn in place
with rows, chunks, rate and status; otherwise a line per status change and
about every 10 seconds of progress; with --json the backfill record as one
JSON line at each change; then the verify that ended each backfill. The exit
code is then 1 if any backfill failed or was stopped, 3 if an ending verify
found differences. When the daemon stops answering (a restart), --wait tries
to reach it again for --reconnect (default 60s) and goes on where the
restarted daemon resumed the backfills; past that it exits 1 saying the
daemon is unreachable. "tidemark backfill wait STREAM OBJECT..." follows
backfills started elsewhere the same way.

--sample N copies only about the first N rows of each object in key order
(whole chunks) and leaves the rest of its destination table alone: check a
slice first. --at TIME (RFC 3339) keeps the backfills pending until then, for
quiet hours. --rows-per-second limits each backfill's reads (change it while
it runs with "tidemark backfill set-rate"). --filter SQL backfills only the
source rows matching the condition, leaving the destination's other rows
alone: the table's columns, literals, comparison and arithmetic operators,
AND/OR/NOT, IN, BETWEEN, LIKE/ILIKE, IS NULL, casts to built-in types and a
list of built-in functions (docs/backfill.md, "Row filters"); anything else
is refused with exit code 2, naming it. --columns a,b fills only these non-key columns of the rows the
destination holds, leaving its other columns alone.

--as-one-run makes the backfills one run: one id (printed), completed when
every backfill is; see it with "tidemark backfill show-run ID" and stop it
with "tidemark backfill stop-run ID". With --wait, the run is followed
until it has ended, then its status is printed.`,
		Args: usageArgs(2, -1),
		RunE: func(c *cobra.Command, args []string) error {
			// Checked here too: NaN and infinities do not even encode as JSON.
			if stream.CheckRate(req.RowsPerSecond) != nil {
				return usageErr("--rows-per-second %g: use 0 (the stream's limit) or a rate from 1 to %d", req.RowsPerSecond, config.MaxRowsPerSecond)
			}
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return &exitError{code: ExitUsage, err: fmt.Errorf("--at %q is not a time: use RFC 3339, e.g. 2026-12-01T02:00:00+01:00", at)}
				}
				req.StartAt = &t
			}
			req.Objects = args[1:]
			var es *eventStream
			if wait {
				// Subscribed first, so that no event of the backfills is missed.
				var err error
				if es, err = g.client().subscribe(c.Context(), args[0]); err != nil {
					return err
				}
				defer es.Close()
			}
			var out []store.Backfill
			err := g.client().do(c.Context(), "POST", "/api/v1/streams/"+url.PathEscape(args[0])+"/backfills", req, &out)
			if err != nil {
				return err
			}
			if !g.json && len(out) > 0 && out[0].RunID != 0 {
				fmt.Fprintf(g.stdout, "run %d of %d backfill(s)\n", out[0].RunID, len(out))
			}
			if wait {
				return g.followRun(c.Context(), es, out)
			}
			if g.json {
				return g.printJSON(out)
			}
			for _, b := range out {
				fmt.Fprintf(g.stdout, "backfill %d of %s.%s: %s\n", b.ID, b.Schema, b.Table, b.Status)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "follow the backfills' progress until each ends and its verify is over; exit 1 if any failed or was stopped, 3 if a verify found differences")
	g.addReconnectFlag(c)
	c.Flags().Int64Var(&req.SampleRows, "sample", 0, "copy only about the first N rows of each object in key order, N up to 1000000000000")
	c.Flags().StringVar(&at, "at", "", "start at this RFC 3339 time (quiet hours) instead of now")
	c.Flags().Float64Var(&req.RowsPerSecond, "rows-per-second", 0, "limit each backfill's reads: 1 to 1000000000 rows/s (0: the stream's backfill.rows_per_second)")
	c.Flags().StringVar(&req.Filter, "filter", "", "backfill only the source rows matching the `SQL` condition")
	c.Flags().StringSliceVar(&req.Columns, "columns", nil, "fill only the non-key columns `a,b` of rows the destination holds")
	c.Flags().BoolVar(&req.AsOneRun, "as-one-run", false, "make the backfills one run: one id, completed when every backfill is")
	return c
}

// followRun follows initiated backfills to their end (see
// followBackfills); for the backfills of one run, the run's status is
// printed last.
func (g *globals) followRun(ctx context.Context, es *eventStream, out []store.Backfill) error {
	if len(out) == 0 || out[0].RunID == 0 {
		return g.followBackfills(ctx, es, out)
	}
	id := out[0].RunID
	err := g.followBackfills(ctx, es, out)
	if g.json {
		return err
	}
	var v api.RunView
	if rerr := g.client().do(ctx, "GET", runPath([]string{strconv.FormatInt(id, 10)}), nil, &v); rerr != nil {
		return errors.Join(err, rerr)
	}
	fmt.Fprintf(g.stdout, "run %d: %s\n", v.ID, v.Status)
	return err
}

// runArgs is how show-run and stop-run take a run: "ID", as set-rate
// takes a backfill, or the deprecated "STREAM ID".
const runArgs = `ID is the run's id, as "backfill initiate --as-one-run" prints it and
"backfill list" shows it (RUN). The older form STREAM ID still works: it
also checks that the run is the stream's.`

// runPath is the API path of the run args name: /api/v1/runs/ID, or the
// stream's deprecated alias for STREAM ID.
func runPath(args []string) string {
	if len(args) == 2 {
		return "/api/v1/streams/" + url.PathEscape(args[0]) + "/runs/" + url.PathEscape(args[1])
	}
	return "/api/v1/runs/" + url.PathEscape(args[0])
}

// backfillShowRunCmd is show-run, or under its deprecated name "run" (a
// run of backfills reads like running one), which takes STREAM ID only,
// as it always did.
func backfillShowRunCmd(g *globals, name string) *cobra.Command {
	use, args := name+" ID", usageArgs(1, 2)
	if name != "show-run" {
		use, args = name+" STREAM ID", usageArgs(2, 2)
	}
	c := &cobra.Command{
		Use:   use,
		Short: "Show a run (backfills initiated together with --as-one-run): its status, totals and each backfill",
		Long:  "Show a run (backfills initiated together with --as-one-run): its status, totals\nand each backfill.\n\n" + runArgs,
		Args:  args,
		RunE: func(c *cobra.Command, args []string) error {
			if name != "show-run" {
				// On stderr, not where cobra's Deprecated prints: stdout
				// may be JSON a script reads.
				fmt.Fprintf(g.stderr, "tidemark: \"backfill %s\" is deprecated: use \"tidemark backfill show-run ID\"\n", name)
			}
			var v api.RunView
			if err := g.client().do(c.Context(), "GET", runPath(args), nil, &v); err != nil {
				return err
			}
			return g.printRun(v)
		},
	}
	c.Hidden = name != "show-run"
	return c
}

func backfillStopRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stop-run ID",
		Short: "Stop the backfills of a run still pending or active; refused for a run that has ended",
		Long:  "Stop the backfills of a run still pending or active; refused for a run that has\nended.\n\n" + runArgs,
		Args:  usageArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			var v api.RunView
			if err := g.client().do(c.Context(), "POST", runPath(args)+"/stop", nil, &v); err != nil {
				return err
			}
			return g.printRun(v)
		},
	}
}

// printRun shows a run: a line of its status and totals, then its
// backfills.
func (g *globals) printRun(v api.RunView) error {
	if g.json {
		return g.printJSON(v)
	}
	fmt.Fprintf(g.stdout, "run %d of %s: %s, started by %s, %s rows read, %s written, %s\n", v.ID, v.Stream, v.Status, v.StartedBy,
		thousands(v.RowsRead), thousands(v.RowsWritten), bytesText(v.Bytes))
	if v.Error != "" {
		fmt.Fprintf(g.stdout, "error: %s\n", v.Error)
	}
	tw := g.table()
	fmt.Fprintln(tw, "ID\tOBJECT\tSTATUS\tREAD\tWRITTEN\tSTARTED\tFINISHED\tLOADED\tERROR")
	for _, b := range v.Backfills {
		fmt.Fprintf(tw, "%d\t%s.%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, cell(b.Schema), cell(b.Table), b.Status, thousands(b.RowsRead), thousands(b.RowsWritten),
			ago(b.StartedAt), ago(b.FinishedAt), ago(b.LoadedAt), cell(b.Error))
	}
	return tw.Flush()
}

func backfillSetRateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set-rate ID ROWS_PER_SECOND",
		Short: "Change a pending or active backfill's rows/s limit (1 to 1000000000) without stopping it (0: the stream's limit)",
		Long: `Change a pending or active backfill's rows/s limit (1 to 1000000000) without
stopping it; 0 goes back to the stream's backfill.rows_per_second.

ID is the backfill's id, as "backfill initiate" prints it and "backfill
list" shows it (ID): a backfill's id, like a run's, is unique across
streams.`,
		Args: usageArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			rate, err := strconv.ParseFloat(args[1], 64)
			if err != nil || stream.CheckRate(rate) != nil {
				return &exitError{code: ExitUsage, err: fmt.Errorf("ROWS_PER_SECOND %q: use 0 (the stream's limit) or a rate from 1 to %d", args[1], config.MaxRowsPerSecond)}
			}
			var out store.Backfill
			if err := g.client().do(c.Context(), "PATCH", "/api/v1/backfills/"+url.PathEscape(args[0]), api.RateRequest{RowsPerSecond: &rate}, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			_, err = fmt.Fprintf(g.stdout, "backfill %d of %s.%s: %s, limit %s\n", out.ID, out.Schema, out.Table, out.Status, limitText(rate))
			return err
		},
	}
}

func limitText(rate float64) string {
	if rate == 0 {
		return "the stream's"
	}
	return strconv.FormatFloat(rate, 'f', -1, 64) + " rows/s"
}

func backfillListCmd(g *globals) *cobra.Command {
	var stream, object, status, startedBy, since string
	c := &cobra.Command{
		Use:   "list",
		Short: "List backfills (one line per copy of a table), newest first, with the run each belongs to",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"stream": stream, "object": object, "status": status, "started_by": startedBy, "since": since} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var out []store.Backfill
			if err := g.client().do(c.Context(), "GET", "/api/v1/backfills?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "ID\tRUN\tSTREAM\tOBJECT\tSTATUS\tBY\tREAD\tWRITTEN\tREMOVED\tCHUNKS\tCONFLICTS\tCREATED\tLOADED\tVERIFY\tERROR")
			for _, b := range out {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s.%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, runText(b.RunID), b.Stream, cell(b.Schema), cell(b.Table), b.Status, cell(b.StartedBy),
					thousands(b.RowsRead), thousands(b.RowsWritten), thousands(b.RowsRemoved), thousands(b.Chunks), thousands(b.WindowConflicts), ago(&b.CreatedAt), ago(b.LoadedAt), verifyText(b.Verify), cell(b.Error))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&stream, "stream", "", "only this stream")
	c.Flags().StringVar(&object, "object", "", "only this object (schema.table)")
	c.Flags().StringVar(&status, "status", "", "only this status (pending, active, completed, stopped, failed)")
	c.Flags().StringVar(&startedBy, "started-by", "", "only backfills started by this (automatic, cli, api, api:NAME)")
	c.Flags().StringVar(&since, "since", "", "only backfills created at or after this RFC 3339 time")
	return c
}

// runText is the run a backfill belongs to, "-" for none.
func runText(id int64) string {
	if id == 0 {
		return "-"
	}
	return strconv.FormatInt(id, 10)
}

// verifyText is the verify that ended a backfill, in a word or two.
func verifyText(v *store.VerifySummary) string {
	switch {
	case v == nil:
		return "-"
	case v.Status == "differ":
		return fmt.Sprintf("differ (%s of %s ranges)", thousands(int64(v.DifferingRanges)), thousands(int64(v.Ranges)))
	}
	return v.Status
}
