package cli

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/store"
)

func tasksCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tasks",
		Short: "List recurring tasks with their schedule and dependencies",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			var out []api.TaskView
			if err := g.client().do(c.Context(), "GET", "/api/v1/tasks", nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "TASK\tTYPE\tSCHEDULE\tTIME ZONE\tUPSTREAM\tREADS\tFLAGS")
			for _, t := range out {
				var flags []string
				for _, f := range []struct {
					name string
					on   bool
				}{{"paused", t.Paused}, {"dry-run", t.DryRun}, {"self-dependent", t.SelfDependent}} {
					if f.on {
						flags = append(flags, f.name)
					}
				}
				var reads []string
				for _, r := range t.Reads {
					reads = append(reads, r.Stream+":"+r.Object+"("+r.DateColumn+")")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Type, t.Schedule, t.Timezone, dash(strings.Join(t.Upstream, ",")),
					dash(strings.Join(reads, ",")), dash(strings.Join(flags, ",")))
			}
			return tw.Flush()
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// requestFlags are the options of a backfill request.
type requestFlags struct {
	name, startAt, runAt, from, to, dates, weekdays, monthDays   string
	timeRange                                                    string
	downstream, upstream, coverage, userTZ                       string
	values, excludeTasks, excludeOutputs                         []string
	keepPaused, dryRunTask, waitScheduled, single, stopOnFailure bool
	confirm                                                      bool
	groups                                                       int
	order, paused, dryRun, hourlyScope, resourceGroup            string
	succeeded, running                                           string
}

func (f *requestFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.name, "name", "", "backfill name (default TASK_YYYYMMDD_N)")
	fl.StringVar(&f.startAt, "start-at", "", "start at this future time (RFC 3339) instead of now")
	// --run-at is --start-at's old name: "run" names table backfills
	// started together (docs/glossary.md).
	fl.StringVar(&f.runAt, "run-at", "", "deprecated alias of --start-at")
	_ = fl.MarkDeprecated("run-at", "use --start-at (the same time)")
	fl.StringVar(&f.from, "from", "", "first data timestamp, YYYY-MM-DD")
	fl.StringVar(&f.to, "to", "", "last data timestamp, YYYY-MM-DD (default: --from)")
	fl.StringVar(&f.dates, "dates", "", "custom data timestamps, comma-separated YYYY-MM-DD (instead of --from/--to/--weekdays/--month-days)")
	fl.StringVar(&f.weekdays, "weekdays", "", "by cycle: weekdays within --from/--to, e.g. mon,fri")
	fl.StringVar(&f.monthDays, "month-days", "", "by cycle: month days within --from/--to, e.g. 1,15,L (L = month end)")
	fl.StringVar(&f.timeRange, "time-range", "", "minute, hourly and cron tasks: cycles within HH:MM-HH:MM of each date")
	fl.StringVar(&f.downstream, "downstream", "", "also downstream tasks: 1-10 levels or all")
	fl.StringVar(&f.upstream, "upstream", "", "also upstream tasks: 1-10 levels or all")
	fl.StringVar(&f.coverage, "coverage", "", "mass selection: projects, outputs, descendants, children, end_points, start_points, names, ids, ancestors, ancestors_descendants")
	fl.StringSliceVar(&f.values, "values", nil, "the projects, outputs, names, ids, children, end or start points of --coverage")
	fl.StringSliceVar(&f.excludeTasks, "exclude-task", nil, "leave tasks out (names or ids); between selected tasks they dry-run")
	fl.StringSliceVar(&f.excludeOutputs, "exclude-output", nil, "leave tasks with these output names out")
	fl.BoolVar(&f.keepPaused, "keep-paused", false, "keep paused tasks and their downstream in list and mass selections")
	fl.IntVar(&f.groups, "groups", 1, "concurrency groups, 1-12")
	fl.StringVar(&f.order, "order", "", "asc (default) or desc business time order")
	fl.BoolVar(&f.dryRunTask, "dry-run-task", false, "the start task's instances dry-run (succeed without running)")
	fl.StringVar(&f.paused, "paused", "", "paused tasks' instances: block (default), dry_run or run")
	fl.StringVar(&f.dryRun, "dry-run-policy", "", "dry-run tasks' instances: dry_run (default) or run")
	fl.BoolVar(&f.waitScheduled, "wait-scheduled", false, "hold each instance until its scheduled time")
	fl.StringVar(&f.hourlyScope, "hourly-scope", "", "with --time-range: all (default) or within (day tasks run only if scheduled within the range)")
	fl.StringVar(&f.resourceGroup, "resource-group", "", "run every instance in this resource group")
	fl.BoolVar(&f.single, "single-instance", false, "one instance covering all dates, for tasks that allow it")
	fl.StringVar(&f.succeeded, "succeeded", "", "dates that already succeeded: rerun (default), skip or failed_only")
	fl.StringVar(&f.running, "running", "", "dates with a run in progress: wait (default) or skip")
	fl.BoolVar(&f.stopOnFailure, "stop-on-failure", false, "stop the whole backfill at the first failure")
	fl.BoolVar(&f.confirm, "confirm", false, "accept a plan over the confirmation threshold")
	fl.StringVar(&f.userTZ, "tz", "", "show scheduled times also in this time zone (default: $TZ or the system's zone)")
}

// request builds the API request for task.
func (f *requestFlags) request(task string) (plan.Request, error) {
	if f.groups < 1 || f.groups > plan.MaxGroups {
		return plan.Request{}, usageErr("--groups %d: use 1 to %d concurrency groups (1, the default, runs the dates one after another)", f.groups, plan.MaxGroups)
	}
	r := plan.Request{Name: f.name, Task: task, Groups: f.groups, Order: f.order, DryRunTask: f.dryRunTask,
		Paused: f.paused, DryRun: f.dryRun, WaitScheduled: f.waitScheduled, HourlyScope: f.hourlyScope,
		ResourceGroup: f.resourceGroup, SingleInstance: f.single, Succeeded: f.succeeded, Running: f.running,
		StopOnFailure: f.stopOnFailure, Confirm: f.confirm}
	flag, at := "--start-at", f.startAt
	switch {
	case f.startAt != "" && f.runAt != "" && f.startAt != f.runAt:
		return r, usageErr("--start-at %s and --run-at %s differ: give --start-at only (--run-at is its deprecated alias)", f.startAt, f.runAt)
	case f.startAt == "":
		flag, at = "--run-at", f.runAt
	}
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return r, usageErr("%s %q: use RFC 3339, e.g. 2026-12-01T02:00:00+01:00", flag, at)
		}
		r.StartAt = &t
	}
	if err := f.dateFlags(&r.Dates); err != nil {
		return r, err
	}
	if f.timeRange != "" {
		from, to, ok := strings.Cut(f.timeRange, "-")
		if !ok {
			return r, usageErr("--time-range %q: use HH:MM-HH:MM", f.timeRange)
		}
		r.TimeRange = &plan.TimeRange{From: from, To: to}
	}
	var err error
	r.Scope.Mode = plan.ScopeTask
	if f.downstream != "" || f.upstream != "" {
		r.Scope.Mode = plan.ScopeList
		if r.Scope.Downstream, err = levels("--downstream", f.downstream); err != nil {
			return r, err
		}
		if r.Scope.Upstream, err = levels("--upstream", f.upstream); err != nil {
			return r, err
		}
	}
	if f.coverage != "" {
		r.Scope.Mode, r.Scope.Coverage, r.Scope.Values = plan.ScopeMass, f.coverage, f.values
	}
	r.Scope.ExcludeTasks, r.Scope.ExcludeOutputs, r.Scope.KeepPaused = f.excludeTasks, f.excludeOutputs, f.keepPaused
	return r, nil
}

func (f *requestFlags) dateFlags(d *plan.Dates) error {
	if f.dates != "" {
		d.Mode = plan.DatesCustom
		for _, s := range strings.Split(f.dates, ",") {
			day, err := calendar.ParseDate(strings.TrimSpace(s))
			if err != nil {
				return usageErr("--dates: %v", err)
			}
			d.List = append(d.List, day)
		}
		return nil
	}
	if f.from == "" {
		return usageErr("give the data timestamps: --from YYYY-MM-DD [--to YYYY-MM-DD], or --dates")
	}
	var err error
	if d.From, err = calendar.ParseDate(f.from); err != nil {
		return usageErr("--from: %v", err)
	}
	d.To = d.From
	if f.to != "" {
		if d.To, err = calendar.ParseDate(f.to); err != nil {
			return usageErr("--to: %v", err)
		}
	}
	d.Mode = plan.DatesRange
	if f.weekdays != "" || f.monthDays != "" {
		d.Mode = plan.DatesCycle
		if d.Weekdays, err = parseWeekdays(f.weekdays); err != nil {
			return err
		}
		if d.MonthDays, err = parseMonthDays(f.monthDays); err != nil {
			return err
		}
	}
	return nil
}

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func levels(flag, v string) (int, error) {
	switch v {
	case "":
		return 0, nil
	case "all":
		return dag.AllLevels, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 10 {
		return 0, usageErr("%s %q: use 1-10 or all", flag, v)
	}
	return n, nil
}

func parseWeekdays(v string) ([]time.Weekday, error) {
	var out []time.Weekday
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		wd, ok := calendar.WeekdayNamed(s)
		if !ok {
			return nil, usageErr("--weekdays: %q is not a weekday; use mon,tue,wed,thu,fri,sat,sun (or the full names)", s)
		}
		out = append(out, wd)
	}
	return out, nil
}

func parseMonthDays(v string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, ok := calendar.MonthDayNamed(s)
		if !ok {
			return nil, usageErr("--month-days: %q is not a day of the month; use 1-31 or L for the last day", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func batchCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "batch", Short: "Backfill recurring tasks for past business dates: preview, submit, operate"}
	c.AddCommand(batchSubmitCmd(g, true), batchSubmitCmd(g, false), batchListCmd(g), batchShowCmd(g),
		batchInstancesCmd(g), batchLogCmd(g), batchExportCmd(g), batchWaitCmd(g),
		batchActionCmd(g, "stop", "Stop a batch backfill: running instances are ended, the rest will not run", "/stop"),
		batchRerunCmd(g),
		instanceActionCmd(g, "stop-instance", "Stop one instance (its process group ends, its SQL is cancelled)", "stop"),
		instanceActionCmd(g, "mark-succeeded", "Mark an instance (of a batch backfill or the recurring schedule) succeeded so what waits for it proceeds", "mark-succeeded"),
		instanceActionCmd(g, "rerun-instance", "Re-run one failed or stopped instance (or a blocked one of the recurring schedule)", "rerun"))
	return c
}

func batchSubmitCmd(g *globals, preview bool) *cobra.Command {
	var f requestFlags
	var limit int
	var wait bool
	use, short := "backfill TASK", "Submit a batch backfill of TASK (and, with the scope flags, its upstream or downstream)"
	if preview {
		use, short = "preview TASK", "Show the plan of a batch backfill — every instance, group, order and wait — without running anything"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			req, err := f.request(args[0])
			if err != nil {
				return err
			}
			q := url.Values{}
			if f.userTZ != "" {
				q.Set("tz", f.userTZ)
			} else if tz := localZoneName(); tz != "" {
				q.Set("tz", tz)
			}
			if preview {
				q.Set("limit", strconv.Itoa(limit))
				var out api.PlanView
				if err := g.client().do(c.Context(), "POST", "/api/v1/batch/preview?"+q.Encode(), req, &out); err != nil {
					return err
				}
				if g.json {
					return g.printJSON(out)
				}
				return printPlan(g, out)
			}
			var es *eventStream
			if wait {
				// Subscribed first, so that no event of the backfill is missed.
				if es, err = g.client().subscribe(c.Context(), ""); err != nil {
					return err
				}
				defer es.Close()
			}
			var out api.SubmitResponse
			if err := g.client().do(c.Context(), "POST", "/api/v1/batch/backfills?"+q.Encode(), req, &out); err != nil {
				return err
			}
			if g.json && !wait {
				return g.printJSON(out)
			}
			if !g.json {
				fmt.Fprintf(g.stdout, "batch backfill %d %q: %d instance(s) of %d task(s) over %d date(s) in %d group(s); %s\n",
					out.Backfill.ID, out.Backfill.Name, out.Plan.Count, len(out.Plan.Tasks), len(out.Plan.Dates), len(out.Plan.Groups), out.Backfill.State)
			}
			if wait {
				return g.followBatch(c.Context(), es, out.Backfill)
			}
			return nil
		},
	}
	f.register(c)
	if preview {
		c.Flags().IntVar(&limit, "limit", 200, "instances to show")
	} else {
		c.Flags().BoolVar(&wait, "wait", false, "follow the backfill's progress until it ends (a bar per group on a terminal, a line per instance end otherwise, a JSON line per event with --json); exit 1 unless it succeeded")
	}
	groupFlags(c, requestFlagGroups)
	return c
}

// localZoneName is the IANA name of the local time zone: $TZ, else the
// zone /etc/localtime links to; "" when neither names one (UTC is shown).
func localZoneName() string {
	if tz := os.Getenv("TZ"); tz != "" {
		return strings.TrimPrefix(tz, ":")
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			return name
		}
	}
	return ""
}

func batchListCmd(g *globals) *cobra.Command {
	var task, state, startedBy, since string
	c := &cobra.Command{
		Use:   "list",
		Short: "List batch backfills (of recurring tasks), newest first: who started each, when, with which options",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"task": task, "state": state, "started_by": startedBy, "since": since} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var out []api.BatchBackfillView
			if err := g.client().do(c.Context(), "GET", "/api/v1/batch/backfills?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "ID\tNAME\tTASK\tSTATE\tINSTANCES\tSTARTED BY\tCREATED\tFINISHED")
			for _, b := range out {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, cell(b.Name), b.Task, b.State, stateCounts(b), cell(b.StartedBy), ago(&b.CreatedAt), ago(b.FinishedAt))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&task, "task", "", "only backfills started from this task id")
	c.Flags().StringVar(&state, "state", "", "only backfills in this state")
	c.Flags().StringVar(&startedBy, "started-by", "", "only backfills started by (cli, api, api:NAME)")
	c.Flags().StringVar(&since, "since", "", "only backfills created at or after (RFC 3339)")
	return c
}

func stateCounts(b api.BatchBackfillView) string {
	var parts []string
	for _, st := range []string{store.InstanceSucceeded, store.InstanceDryRun, store.InstanceRunning, store.InstanceWaiting,
		store.InstanceFailed, store.InstanceStopped, store.InstanceBlocked} {
		if n := b.States[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	return fmt.Sprintf("%d (%s)", b.Instances, strings.Join(parts, ", "))
}

func batchShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one batch backfill with its options and instance counts",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			var b api.BatchBackfillView
			if err := g.client().do(c.Context(), "GET", "/api/v1/batch/backfills/"+url.PathEscape(args[0]), nil, &b); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(b)
			}
			fmt.Fprintf(g.stdout, "batch backfill %d %q of %s: %s\n  instances: %s\n  started by %s at %s; to start at %s; finished %s\n  request: %s\n",
				b.ID, b.Name, b.Task, b.State, stateCounts(b), b.StartedBy, ago(&b.CreatedAt), ago(&b.StartAt), ago(b.FinishedAt), b.Request)
			if b.Error != "" {
				fmt.Fprintf(g.stdout, "  %s\n", b.Error)
			}
			for _, c := range b.CausedBy {
				fmt.Fprintf(g.stdout, "  %s\n", cell(c))
			}
			return nil
		},
	}
}

func batchInstancesCmd(g *globals) *cobra.Command {
	var state, task string
	var limit int
	c := &cobra.Command{
		Use:   "instances ID",
		Short: "List a batch backfill's instances by date and group with their states",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if state != "" {
				q.Set("state", state)
			}
			if task != "" {
				q.Set("task", task)
			}
			var out []api.BatchInstanceView
			if err := g.client().do(c.Context(), "GET", "/api/v1/batch/backfills/"+url.PathEscape(args[0])+"/instances?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			tw := g.table()
			fmt.Fprintln(tw, "ID\tGROUP\tTASK\tBIZ TIME\tMODE\tSTATE\tATTEMPT\tFINISHED\tREASON")
			for _, in := range out {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", in.ID, in.Group, in.Task, in.BizTime.Format("2006-01-02 15:04Z07:00"),
					in.Mode, in.State, in.Attempt, ago(in.FinishedAt), cell(firstLine(in.Reason+" "+in.Error)))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&state, "state", "", "only instances in this state")
	c.Flags().StringVar(&task, "task", "", "only instances of this task id")
	c.Flags().IntVar(&limit, "limit", 1000, "instances to show")
	return c
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func batchLogCmd(g *globals) *cobra.Command {
	var attempt int
	var code bool
	c := &cobra.Command{
		Use:   "log INSTANCE",
		Short: "Print an instance attempt's log (stdout and stderr), or with --code the code it ran",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if attempt < 0 || attempt > 1_000_000 {
				return usageErr("--attempt %d: use an attempt number from 1 to 1000000, or leave it out for the latest", attempt)
			}
			if code {
				var in api.BatchInstanceView
				if err := g.client().do(c.Context(), "GET", "/api/v1/batch/instances/"+url.PathEscape(args[0]), nil, &in); err != nil {
					return err
				}
				_, err := fmt.Fprintln(g.stdout, in.Rendered)
				return err
			}
			var out api.LogView
			path := "/api/v1/batch/instances/" + url.PathEscape(args[0]) + "/log"
			if attempt > 0 {
				path += "?attempt=" + strconv.Itoa(attempt)
			}
			if err := g.client().do(c.Context(), "GET", path, nil, &out); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(out)
			}
			_, err := fmt.Fprint(g.stdout, out.Log)
			return err
		},
	}
	c.Flags().IntVar(&attempt, "attempt", 0, "attempt number (default: the latest)")
	c.Flags().BoolVar(&code, "code", false, "print the rendered code instead")
	return c
}

func batchExportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "export ID",
		Short: "Print a batch backfill's selected node list as CSV",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := g.client().raw(c.Context(), "GET", "/api/v1/batch/backfills/"+url.PathEscape(args[0])+"/nodes.csv")
			if err != nil {
				return err
			}
			_, err = g.rawOut().Write(body)
			return err
		},
	}
}

func batchActionCmd(g *globals, use, short, suffix string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " ID",
		Short: short,
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			var b api.BatchBackfillView
			if err := g.client().do(c.Context(), "POST", "/api/v1/batch/backfills/"+url.PathEscape(args[0])+suffix, nil, &b); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(b)
			}
			fmt.Fprintf(g.stdout, "batch backfill %d: %s\n", b.ID, b.State)
			return nil
		},
	}
}

func batchRerunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rerun ID [INSTANCE...]",
		Short: "Re-run a batch backfill's failed and stopped instances (or only those named)",
		Args:  usageArgs(1, -1),
		RunE: func(c *cobra.Command, args []string) error {
			var req api.RerunRequest
			for _, a := range args[1:] {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil {
					return usageErr("instance %q is not an id", a)
				}
				req.Instances = append(req.Instances, id)
			}
			var b api.BatchBackfillView
			if err := g.client().do(c.Context(), "POST", "/api/v1/batch/backfills/"+url.PathEscape(args[0])+"/rerun", req, &b); err != nil {
				return err
			}
			if g.json {
				return g.printJSON(b)
			}
			fmt.Fprintf(g.stdout, "batch backfill %d: %s\n", b.ID, b.State)
			return nil
		},
	}
}

func instanceActionCmd(g *globals, use, short, action string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " INSTANCE",
		Short: short,
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			var in api.BatchInstanceView
			var err error
			if action == "stop" {
				in, err = g.stopInstance(c.Context(), args[0])
			} else {
				err = g.client().do(c.Context(), "POST", "/api/v1/batch/instances/"+url.PathEscape(args[0])+"/"+action, nil, &in)
			}
			if err != nil {
				return err
			}
			if g.json {
				return g.printJSON(in)
			}
			fmt.Fprintf(g.stdout, "instance %d (%s %s): %s\n", in.ID, in.Task, in.BizTime.Format(time.RFC3339), in.State)
			return nil
		},
	}
}
