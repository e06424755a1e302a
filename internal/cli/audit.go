package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// auditRecord is an audit record with its figures kept as JSON, decoded by
// kind.
type auditRecord struct {
	api.AuditRecord
	Figures json.RawMessage `json:"figures"`
}

func auditCmd(g *globals) *cobra.Command {
	var kind, stream, object, task, state, startedBy, since, until, format string
	var limit int
	c := &cobra.Command{
		Use:   "audit",
		Short: "The audit trail of every backfill, stream and batch, newest first (table, JSON or CSV)",
		Long: `The audit trail of every backfill, stream and batch, newest first: who
started what, when, with which options, and how it ended.

Filters combine with AND. --stream and --object select stream backfills,
--task batch backfills; --state takes a stream backfill status (pending,
active, completed, stopped, failed) or a batch backfill state (waiting,
running, succeeded, failed, stopped, blocked). --since and --until bound the
creation time (RFC 3339). --format csv prints the API's CSV as it is
(options and figures as JSON); --json is --format json.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			switch format {
			case "table", "json", "csv":
			default:
				return usageErr("--format %q: use table, json or csv", format)
			}
			if g.json {
				if c.Flags().Changed("format") && format != "json" {
					return usageErr("--json and --format %s: give one of them", format)
				}
				format = "json"
			}
			q := url.Values{}
			for k, v := range map[string]string{"kind": kind, "stream": stream, "object": object, "task": task, "state": state,
				"started_by": startedBy, "since": since, "until": until} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if c.Flags().Changed("limit") {
				q.Set("limit", strconv.Itoa(limit))
			}
			if format == "csv" {
				q.Set("format", "csv")
				body, err := g.client().raw(c.Context(), "GET", "/api/v1/audit?"+q.Encode())
				if err != nil {
					return err
				}
				_, err = g.rawOut().Write(body)
				return err
			}
			var out []auditRecord
			if err := g.client().do(c.Context(), "GET", "/api/v1/audit?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if format == "json" {
				if out == nil {
					out = []auditRecord{}
				}
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "KIND\tID\tNAME\tSTATE\tSTARTED BY\tCREATED\tFINISHED\tFIGURES\tERROR")
			for _, r := range out {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, r.ID, cell(r.Name), r.State, cell(r.StartedBy),
					ago(&r.CreatedAt), ago(r.FinishedAt), auditFigures(r), dash(cell(firstLine(r.Error))))
			}
			return tw.Flush()
		},
	}
	fl := c.Flags()
	fl.StringVar(&kind, "kind", "", "only backfills of this kind: stream or batch; action: every request that changed something (pause, resume, stop, rate, rerun, …) and who sent it; all: both")
	fl.StringVar(&stream, "stream", "", "only stream backfills of this stream")
	fl.StringVar(&object, "object", "", "only stream backfills of this object (schema.table)")
	fl.StringVar(&task, "task", "", "only batch backfills started from this task id")
	fl.StringVar(&state, "state", "", "only backfills in this status or state (completed, failed, succeeded, …)")
	fl.StringVar(&startedBy, "started-by", "", "only backfills started by (automatic, reset, cli, api, cli:NAME, api:NAME)")
	fl.StringVar(&since, "since", "", "only backfills created at or after this RFC 3339 time")
	fl.StringVar(&until, "until", "", "only backfills created before this RFC 3339 time")
	fl.IntVar(&limit, "limit", store.DefaultBackfillLimit, "at most this many records, 1 to 100000")
	fl.StringVar(&format, "format", "table", "table, json or csv")
	return c
}

// auditFigures summarises a record's figures for the table.
func auditFigures(r auditRecord) string {
	switch r.Kind {
	case api.AuditStream:
		var f api.StreamFigures
		if json.Unmarshal(r.Figures, &f) == nil {
			return fmt.Sprintf("%s read, %s written, %s chunk(s), %s", thousands(f.RowsRead), thousands(f.RowsWritten), thousands(f.Chunks), bytesText(f.Bytes))
		}
	case api.AuditBatch:
		var f api.BatchFigures
		if json.Unmarshal(r.Figures, &f) == nil {
			return stateCounts(api.BatchBackfillView{Instances: f.Instances, States: f.States})
		}
	case api.AuditAction:
		var f api.ActionFigures
		if json.Unmarshal(r.Figures, &f) == nil {
			return fmt.Sprintf("HTTP %d", f.Status)
		}
	}
	return dash(string(r.Figures))
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}
