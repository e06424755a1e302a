package plan_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
)

func at(t time.Time) func(*plan.Input) { return func(in *plan.Input) { in.Now = t } }

// run returns "task@date" of each instance in dispatch order.
func run(p *plan.Plan) []string {
	var out []string
	for _, in := range p.Instances {
		out = append(out, in.Task+"@"+in.Date.String()[5:])
	}
	return out
}

func TestGroupsWorkedExample(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.a", "daily"), tk("p.b", "daily", "p.a"))
	tests := []struct {
		name   string
		dates  plan.Dates
		groups int
		order  string
		want   [][]calendar.Date
		run    []string // dispatch order, when checked
		warn   string
	}{
		{
			name: "reference: Jan 11-13, 2 groups", dates: rng("2025-01-11", "2025-01-13"), groups: 2,
			want: [][]calendar.Date{dates("2025-01-11", "2025-01-12"), dates("2025-01-13")},
			// Jan 11 and Jan 13 start together; Jan 12 after Jan 11.
			run: []string{"p.a@01-11", "p.b@01-11", "p.a@01-13", "p.b@01-13", "p.a@01-12", "p.b@01-12"},
		},
		{
			name: "reference descending", dates: rng("2025-01-11", "2025-01-13"), groups: 2, order: plan.OrderDesc,
			want: [][]calendar.Date{dates("2025-01-13", "2025-01-12"), dates("2025-01-11")},
			run:  []string{"p.a@01-13", "p.b@01-13", "p.a@01-11", "p.b@01-11", "p.a@01-12", "p.b@01-12"},
		},
		{
			name: "5 dates, 4 groups", dates: rng("2025-01-01", "2025-01-05"), groups: 4,
			want: [][]calendar.Date{dates("2025-01-01", "2025-01-02"), dates("2025-01-03"), dates("2025-01-04"), dates("2025-01-05")},
		},
		{
			name: "5 dates, 4 groups, descending", dates: rng("2025-01-01", "2025-01-05"), groups: 4, order: plan.OrderDesc,
			want: [][]calendar.Date{dates("2025-01-05", "2025-01-04"), dates("2025-01-03"), dates("2025-01-02"), dates("2025-01-01")},
		},
		{
			name: "7 dates, 3 groups", dates: rng("2025-01-01", "2025-01-07"), groups: 3,
			want: [][]calendar.Date{dates("2025-01-01", "2025-01-02", "2025-01-03"), dates("2025-01-04", "2025-01-05"), dates("2025-01-06", "2025-01-07")},
		},
		{
			name: "more groups than dates", dates: rng("2025-01-11", "2025-01-13"), groups: 5,
			want: [][]calendar.Date{dates("2025-01-11"), dates("2025-01-12"), dates("2025-01-13")},
			warn: "groups reduced from 5 to 3",
		},
		{
			name: "default: one group", dates: rng("2025-01-11", "2025-01-13"),
			want: [][]calendar.Date{dates("2025-01-11", "2025-01-12", "2025-01-13")},
			run:  []string{"p.a@01-11", "p.b@01-11", "p.a@01-12", "p.b@01-12", "p.a@01-13", "p.b@01-13"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := build(t, g, plan.Request{Task: "p.a", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1},
				Dates: tt.dates, Groups: tt.groups, Order: tt.order})
			if !slices.EqualFunc(p.Groups, tt.want, slices.Equal) {
				t.Errorf("Groups = %v, want %v", p.Groups, tt.want)
			}
			if got := slices.Concat(tt.want...); !slices.Equal(p.Dates, got) {
				t.Errorf("Dates = %v, want %v", p.Dates, got)
			}
			for gi, ds := range tt.want {
				for k, d := range ds {
					for _, task := range []string{"p.a", "p.b"} {
						in := on(t, p, task, d.String())
						if in.Group != gi+1 || in.Seq != k {
							t.Errorf("%s on %s: group %d step %d, want %d and %d", task, d, in.Group, in.Seq, gi+1, k)
						}
					}
				}
			}
			if tt.run != nil && !slices.Equal(run(p), tt.run) {
				t.Errorf("dispatch order %v, want %v", run(p), tt.run)
			}
			if tt.warn != "" && !strings.Contains(strings.Join(p.Warnings, "\n"), tt.warn) {
				t.Errorf("warnings %q lack %q", p.Warnings, tt.warn)
			}
		})
	}
}

func TestDateSelection(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.a", "daily"))
	monthEnds := dates("2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30", "2024-05-31", "2024-06-30",
		"2024-07-31", "2024-08-31", "2024-09-30", "2024-10-31", "2024-11-30", "2024-12-31",
		"2025-01-31", "2025-02-28", "2025-03-31")
	tests := []struct {
		name  string
		dates plan.Dates
		order string
		want  []calendar.Date
	}{
		{"range", rng("2025-01-30", "2025-02-02"), "", dates("2025-01-30", "2025-01-31", "2025-02-01", "2025-02-02")},
		{"single day", rng("2025-01-30", "2025-01-30"), "", dates("2025-01-30")},
		{"range descending", rng("2025-01-30", "2025-02-01"), plan.OrderDesc, dates("2025-02-01", "2025-01-31", "2025-01-30")},
		{"month ends incl. Feb 2024 (leap) and Feb 2025",
			plan.Dates{Mode: plan.DatesCycle, From: date("2024-01-01"), To: date("2025-03-31"), MonthDays: []int{calendar.MonthEnd}}, "", monthEnds},
		{"day 30 or month end, Feb 2024",
			plan.Dates{Mode: plan.DatesCycle, From: date("2024-02-01"), To: date("2024-03-31"), MonthDays: []int{30, calendar.MonthEnd}}, "",
			dates("2024-02-29", "2024-03-30", "2024-03-31")},
		{"day 29 or month end, Feb 2025 has no 29th",
			plan.Dates{Mode: plan.DatesCycle, From: date("2025-02-01"), To: date("2025-03-31"), MonthDays: []int{29, calendar.MonthEnd}}, "",
			dates("2025-02-28", "2025-03-29", "2025-03-31")},
		{"Mondays or the 1st",
			plan.Dates{Mode: plan.DatesCycle, From: date("2025-01-01"), To: date("2025-01-15"), Weekdays: []time.Weekday{time.Monday}, MonthDays: []int{1}}, "",
			dates("2025-01-01", "2025-01-06", "2025-01-13")},
		{"custom: sorted, without repeats",
			plan.Dates{Mode: plan.DatesCustom, List: dates("2025-01-05", "2025-01-03", "2025-01-05")}, "", dates("2025-01-03", "2025-01-05")},
		{"custom descending",
			plan.Dates{Mode: plan.DatesCustom, List: dates("2025-01-05", "2025-01-03", "2025-01-09")}, plan.OrderDesc, dates("2025-01-09", "2025-01-05", "2025-01-03")},
		{"far back", rng("1900-01-01", "1900-01-02"), "", dates("1900-01-01", "1900-01-02")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := build(t, g, plan.Request{Task: "p.a", Dates: tt.dates, Order: tt.order})
			if !slices.Equal(p.Dates, tt.want) {
				t.Errorf("Dates = %v, want %v", p.Dates, tt.want)
			}
			if len(p.Instances) != len(tt.want) {
				t.Errorf("%d instances for %d dates", len(p.Instances), len(tt.want))
			}
		})
	}
}

func TestDailyOnHourlyAcrossDST(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tkIn(berlin, "p.h", "hourly"), tkIn(berlin, "p.d", "daily", "p.h"))
	p := build(t, g, plan.Request{Task: "p.h", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1},
		Dates: plan.Dates{Mode: plan.DatesCustom, List: dates("2025-03-29", "2025-03-30", "2025-03-31", "2025-10-26")}},
		at(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	for _, tt := range []struct {
		date  string
		hours int
	}{{"2025-03-29", 24}, {"2025-03-30", 23}, {"2025-03-31", 24}, {"2025-10-26", 25}} {
		var hours []plan.Instance
		for _, in := range of(p, "p.h") {
			if in.Date == date(tt.date) {
				hours = append(hours, in)
			}
		}
		if len(hours) != tt.hours {
			t.Errorf("%s: %d hourly instances, want %d", tt.date, len(hours), tt.hours)
		}
		for k := 1; k < len(hours); k++ {
			if d := hours[k].BizTime.Sub(hours[k-1].BizTime); d != time.Hour {
				t.Errorf("%s: cycles %s and %s are %s apart", tt.date, hours[k-1].BizTime, hours[k].BizTime, d)
			}
		}
		daily := on(t, p, "p.d", tt.date)
		if len(daily.Deps) != tt.hours {
			t.Errorf("%s: the daily instance waits for %d instances, want all %d hours", tt.date, len(daily.Deps), tt.hours)
		}
		for _, d := range daily.Deps {
			if dep := p.Instances[d]; dep.Task != "p.h" || dep.Date != date(tt.date) {
				t.Errorf("%s: daily waits for %s on %s", tt.date, dep.Task, dep.Date)
			}
		}
		if want := date(tt.date).Midnight(berlin); !daily.BizTime.Equal(want) {
			t.Errorf("daily business time %s, want %s", daily.BizTime, want)
		}
	}
}

func TestHourlyOnDaily(t *testing.T) {
	t.Parallel()
	// An hourly task on a daily one waits for the daily cycle of its date.
	g := newGraph(t, tkIn(berlin, "p.d", "daily"), tkIn(berlin, "p.h", "hourly", "p.d"))
	p := build(t, g, plan.Request{Task: "p.d", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-01", "2025-01-02")})
	for _, in := range of(p, "p.h") {
		if got := depTasks(p, in); !slices.Equal(got, []string{"p.d@" + in.Date.String()}) {
			t.Errorf("p.h at %s waits for %v", in.BizTime, got)
		}
	}
}

func TestWeeklyUpstream(t *testing.T) {
	t.Parallel()
	// A daily task on a weekly one waits for the latest weekly cycle.
	g := newGraph(t, tk("p.w", "weekly mon"), tk("p.d", "daily", "p.w"))
	req := plan.Request{Task: "p.w", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-05", "2025-01-14")}
	p := build(t, g, req)
	for d, want := range map[string][]string{
		"2025-01-05": nil, // Sunday: no weekly cycle planned before
		"2025-01-06": {"p.w@2025-01-06"},
		"2025-01-08": {"p.w@2025-01-06"},
		"2025-01-13": {"p.w@2025-01-13"},
		"2025-01-14": {"p.w@2025-01-13"},
	} {
		if got := depTasks(p, on(t, p, "p.d", d)); !slices.Equal(got, want) {
			t.Errorf("p.d on %s waits for %v, want %v", d, got, want)
		}
	}
	// Descending, the Tuesday would wait for a Monday that runs after it.
	req.Order = plan.OrderDesc
	re := refused(t, g, req)
	expectRefusal(t, re, "order", "p.d's cycle 2025-01-14 waits for task p.w's cycle 2025-01-13", `"asc"`)
	// Two groups in ascending order: the wait crosses groups, the order
	// respects it.
	req.Order, req.Groups = plan.OrderAsc, 2
	p = build(t, g, req)
	if got := depTasks(p, on(t, p, "p.d", "2025-01-11")); !slices.Equal(got, []string{"p.w@2025-01-06"}) {
		t.Errorf("p.d on 2025-01-11 waits for %v", got)
	}
	// 2 groups in descending order: Jan 10 (group 1, last step) waits for
	// Monday Jan 6 (group 2, later step... of another group): that works
	// only if nothing circles; Jan 14 waits for Jan 13 in a later step of
	// the same group, which cannot.
	req.Order = plan.OrderDesc
	expectRefusal(t, refused(t, g, req), "order", "later step")
}

func TestSelfDependent(t *testing.T) {
	t.Parallel()
	self := with(tk("p.s", "daily"), func(t *dag.Task) { t.SelfDependent = true })
	g := newGraph(t, self, tk("p.d", "daily", "p.s"))
	req := plan.Request{Task: "p.s", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-01", "2025-01-04")}
	p := build(t, g, req)
	if got := depTasks(p, on(t, p, "p.s", "2025-01-01")); len(got) != 0 {
		t.Errorf("first cycle waits for %v", got)
	}
	for _, d := range []string{"2025-01-02", "2025-01-03", "2025-01-04"} {
		prev := date(d).AddDays(-1).String()
		if got := depTasks(p, on(t, p, "p.s", d)); !slices.Equal(got, []string{"p.s@" + prev}) {
			t.Errorf("p.s on %s waits for %v, want its previous cycle %s", d, got, prev)
		}
		if got := depTasks(p, on(t, p, "p.d", d)); !slices.Equal(got, []string{"p.s@" + d}) {
			t.Errorf("p.d on %s waits for %v", d, got)
		}
	}

	r := req
	r.Groups = 2
	expectRefusal(t, refused(t, g, r), "groups", "p.s", "own previous cycle", "1 group")
	r = req
	r.Order = plan.OrderDesc
	expectRefusal(t, refused(t, g, r), "order", "p.s", "descending order is not supported")
	// Several groups for one date are one group.
	r = req
	r.Groups, r.Dates = 3, rng("2025-01-01", "2025-01-01")
	build(t, g, r)

	// Failed-only: the chain goes through the kept cycles.
	r = req
	r.Succeeded = plan.SucceededFailedOnly
	h := history{"p.s": {
		"2025-01-01T00:00:00Z": "failed", "2025-01-02T00:00:00Z": "succeeded", "2025-01-03T00:00:00Z": "failed", "2025-01-04T00:00:00Z": "succeeded",
	}}
	p = build(t, g, r, func(in *plan.Input) { in.History = h })
	if got := run(p); !slices.Equal(got, []string{"p.s@01-01", "p.s@01-03"}) {
		t.Fatalf("failed-only plan %v", got)
	}
	if got := depTasks(p, on(t, p, "p.s", "2025-01-03")); !slices.Equal(got, []string{"p.s@2025-01-01"}) {
		t.Errorf("p.s on 01-03 waits for %v, want its previous kept cycle", got)
	}
}

func TestDiamond(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.a", "daily"), tk("p.b", "daily", "p.a"), tk("p.c", "daily", "p.a"), tk("p.d", "daily", "p.b", "p.c"))
	for _, groups := range []int{1, 3} {
		p := build(t, g, plan.Request{Task: "p.a", Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverDescendants},
			Dates: rng("2025-01-01", "2025-01-03"), Groups: groups})
		if len(p.Instances) != 12 {
			t.Fatalf("%d instances", len(p.Instances))
		}
		for _, d := range []string{"2025-01-01", "2025-01-02", "2025-01-03"} {
			for task, want := range map[string][]string{
				"p.a": nil,
				"p.b": {"p.a@" + d},
				"p.c": {"p.a@" + d},
				"p.d": {"p.b@" + d, "p.c@" + d},
			} {
				if got := depTasks(p, on(t, p, task, d)); !slices.Equal(got, want) {
					t.Errorf("groups %d: %s on %s waits for %v, want %v", groups, task, d, got, want)
				}
			}
		}
	}
}

func TestExclusions(t *testing.T) {
	t.Parallel()
	g := newGraph(t,
		tk("p.a", "daily"),
		tk("p.b", "daily", "p.a"),
		tk("p.c", "daily", "p.b"),
		with(tk("p.e", "daily", "p.a"), func(t *dag.Task) { t.Output = "tbl_e" }),
	)
	desc := plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverDescendants}
	req := func(s plan.Scope) plan.Request {
		return plan.Request{Task: "p.a", Scope: s, Dates: rng("2025-01-01", "2025-01-01")}
	}

	s := desc
	s.ExcludeTasks = []string{"p.b"}
	p := build(t, g, req(s))
	b := on(t, p, "p.b", "2025-01-01")
	if b.Mode != plan.ModeDryRun || b.Reason != "excluded; dry-run so that downstream proceeds" {
		t.Errorf("excluded task between selected ones: mode %s, reason %q", b.Mode, b.Reason)
	}
	if got := depTasks(p, on(t, p, "p.c", "2025-01-01")); !slices.Equal(got, []string{"p.b@2025-01-01"}) {
		t.Errorf("p.c waits for %v", got)
	}

	// An excluded end of a path has nothing below it: it leaves.
	s = desc
	s.ExcludeTasks = []string{"c"} // by name
	s.ExcludeOutputs = []string{"tbl_e"}
	p = build(t, g, req(s))
	if !slices.Equal(p.Tasks, []string{"p.a", "p.b"}) {
		t.Errorf("Tasks = %v", p.Tasks)
	}

	// An excluded task outside the coverage that connects selected tasks
	// runs as dry-run too; without the exclusion the path is cut.
	s = plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverNames, Values: []string{"c"}}
	p = build(t, g, req(s))
	if !slices.Equal(p.Tasks, []string{"p.a", "p.c"}) || len(on(t, p, "p.c", "2025-01-01").Deps) != 0 {
		t.Errorf("names coverage: Tasks = %v, p.c deps %v", p.Tasks, on(t, p, "p.c", "2025-01-01").Deps)
	}
	s.ExcludeTasks = []string{"p.b"}
	p = build(t, g, req(s))
	if !slices.Equal(p.Tasks, []string{"p.a", "p.b", "p.c"}) || on(t, p, "p.b", "2025-01-01").Mode != plan.ModeDryRun {
		t.Errorf("names coverage with exclusion: Tasks = %v", p.Tasks)
	}

	s = desc
	s.ExcludeTasks = []string{"p.nope"}
	expectRefusal(t, refused(t, g, req(s)), "scope.exclude_tasks[0]", `"p.nope"`)
	s = desc
	s.ExcludeOutputs = []string{"tbl_x"}
	expectRefusal(t, refused(t, g, req(s)), "scope.exclude_outputs[0]", `"tbl_x"`)
	s = plan.Scope{ExcludeTasks: []string{"p.a"}}
	expectRefusal(t, refused(t, g, req(s)), "scope", "selection is empty")
}

func TestModes(t *testing.T) {
	t.Parallel()
	paused := with(tk("p.paused", "daily"), func(t *dag.Task) { t.Paused = true })
	dry := with(tk("p.dry", "daily"), func(t *dag.Task) { t.DryRun = true })
	both := with(tk("p.both", "daily"), func(t *dag.Task) { t.Paused, t.DryRun = true, true })
	g := newGraph(t, paused, dry, both, tk("p.plain", "daily"))
	tests := []struct {
		task, paused, dryRun string
		dryRunTask           bool
		want                 string
		reason               string
	}{
		{"p.paused", "", "", false, plan.ModeBlocked, "paused=block"},
		{"p.paused", plan.PausedBlock, "", false, plan.ModeBlocked, "paused=block"},
		{"p.paused", plan.PausedDryRun, "", false, plan.ModeDryRun, "paused=dry_run"},
		{"p.paused", plan.PausedRun, "", false, plan.ModeRun, ""},
		{"p.dry", "", "", false, plan.ModeDryRun, "dry_run=dry_run"},
		{"p.dry", "", plan.DryRunRun, false, plan.ModeRun, ""},
		{"p.plain", "", "", false, plan.ModeRun, ""},
		{"p.plain", "", "", true, plan.ModeDryRun, "dry_run_task"},
		{"p.paused", plan.PausedRun, "", true, plan.ModeDryRun, "dry_run_task"},
		{"p.both", plan.PausedRun, "", false, plan.ModeDryRun, "dry_run=dry_run"},
		{"p.both", plan.PausedRun, plan.DryRunRun, false, plan.ModeRun, ""},
		{"p.both", "", plan.DryRunRun, false, plan.ModeBlocked, "paused=block"},
	}
	for _, tt := range tests {
		p := build(t, g, plan.Request{Task: tt.task, Paused: tt.paused, DryRun: tt.dryRun, DryRunTask: tt.dryRunTask, Dates: rng("2025-01-01", "2025-01-01")})
		in := p.Instances[0]
		if in.Mode != tt.want || !strings.Contains(in.Reason, tt.reason) || (tt.reason == "") != (in.Reason == "") {
			t.Errorf("%s paused=%q dry_run=%q dry_run_task=%v: mode %s (%q), want %s (%q)",
				tt.task, tt.paused, tt.dryRun, tt.dryRunTask, in.Mode, in.Reason, tt.want, tt.reason)
		}
	}
}

func TestPausedFilter(t *testing.T) {
	t.Parallel()
	g := newGraph(t,
		tk("p.up", "daily"),
		with(tk("p.pu", "daily", "p.up"), func(t *dag.Task) { t.Paused = true }),
		tk("p.a", "daily", "p.pu"),
		with(tk("p.p", "daily", "p.a"), func(t *dag.Task) { t.Paused = true }),
		tk("p.c", "daily", "p.p"),
		tk("p.d", "daily", "p.a"),
		tk("p.e", "daily", "p.d", "p.c"),
	)
	req := plan.Request{Task: "p.a", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels}, Dates: rng("2025-01-01", "2025-01-01")}
	p := build(t, g, req)
	// p.p is paused: it, p.c and p.e (below p.c) leave.
	if !slices.Equal(p.Tasks, []string{"p.a", "p.d"}) {
		t.Errorf("Tasks = %v", p.Tasks)
	}
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "keep_paused") || !strings.Contains(w, "p.p") {
		t.Errorf("warnings %q", p.Warnings)
	}

	req.Scope.KeepPaused = true
	p = build(t, g, req)
	if !slices.Equal(p.Tasks, []string{"p.a", "p.d", "p.p", "p.c", "p.e"}) {
		t.Errorf("keep_paused: Tasks = %v", p.Tasks)
	}
	if in := on(t, p, "p.p", "2025-01-01"); in.Mode != plan.ModeBlocked {
		t.Errorf("kept paused task: mode %s", in.Mode)
	}

	// A paused start task stays (its policy applies) and does not filter
	// what is below it.
	req = plan.Request{Task: "p.p", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-01", "2025-01-01")}
	p = build(t, g, req)
	if !slices.Equal(p.Tasks, []string{"p.p", "p.c"}) || on(t, p, "p.p", "2025-01-01").Mode != plan.ModeBlocked {
		t.Errorf("paused start: Tasks = %v", p.Tasks)
	}

	// A paused ancestor between selected tasks is filtered out but runs as
	// dry-run so that the start task waits for what is above it.
	req = plan.Request{Task: "p.a", Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverAncestors}, Dates: rng("2025-01-01", "2025-01-01")}
	p = build(t, g, req)
	if !slices.Equal(p.Tasks, []string{"p.up", "p.pu", "p.a"}) {
		t.Fatalf("ancestors: Tasks = %v", p.Tasks)
	}
	if in := on(t, p, "p.pu", "2025-01-01"); in.Mode != plan.ModeDryRun || !strings.Contains(in.Reason, "paused") {
		t.Errorf("paused ancestor: %s (%q)", in.Mode, in.Reason)
	}
}

// massGraph:
//
//	x.up → r.root → a.a1 → a.a2 → z.end
//	              → b.b1 → b.b2
//	              → c.c1 ────────→ z.end
//	y.y → a.a2
func massGraph(t testing.TB) *dag.Graph {
	out := func(name string) func(*dag.Task) { return func(t *dag.Task) { t.Output = name } }
	return newGraph(t,
		tk("x.up", "daily"),
		tk("r.root", "daily", "x.up"),
		with(tk("a.a1", "daily", "r.root"), out("t_a1")),
		tk("a.a2", "daily", "a.a1", "y.y"),
		tk("b.b1", "daily", "r.root"),
		with(tk("b.b2", "daily", "b.b1"), out("t_b2")),
		tk("c.c1", "daily", "r.root"),
		tk("y.y", "daily"),
		tk("z.end", "daily", "a.a2", "c.c1"),
	)
}

func TestMassCoverage(t *testing.T) {
	t.Parallel()
	g := massGraph(t)
	tests := []struct {
		coverage string
		values   []string
		want     []string // sorted IDs
	}{
		{plan.CoverProjects, []string{"a"}, []string{"a.a1", "a.a2", "r.root"}},
		{plan.CoverProjects, []string{"a", "y"}, []string{"a.a1", "a.a2", "r.root"}}, // y.y is not downstream
		{plan.CoverOutputs, []string{"t_b2"}, []string{"b.b2", "r.root"}},
		{plan.CoverDescendants, nil, []string{"a.a1", "a.a2", "b.b1", "b.b2", "c.c1", "r.root", "z.end"}},
		{plan.CoverChildren, []string{"a.a1", "c1"}, []string{"a.a1", "a.a2", "c.c1", "r.root", "z.end"}},
		{plan.CoverEndPoints, []string{"z.end"}, []string{"a.a1", "a.a2", "c.c1", "r.root", "z.end"}},
		{plan.CoverEndPoints, []string{"b2"}, []string{"b.b1", "b.b2", "r.root"}},
		{plan.CoverEndPoints, []string{"y.y"}, []string{"r.root", "y.y"}}, // not downstream: the two alone
		{plan.CoverStartPoints, []string{"x.up"}, []string{"r.root", "x.up"}},
		{plan.CoverStartPoints, []string{"b.b2"}, []string{"b.b2", "r.root"}}, // not upstream: the two alone
		{plan.CoverNames, []string{"a2", "b1"}, []string{"a.a2", "b.b1", "r.root"}},
		{plan.CoverIDs, []string{"b.b2", "z.end"}, []string{"b.b2", "r.root", "z.end"}},
		{plan.CoverAncestors, nil, []string{"r.root", "x.up"}},
		{plan.CoverAncestorsDescendants, nil, []string{"a.a1", "a.a2", "b.b1", "b.b2", "c.c1", "r.root", "x.up", "z.end"}},
	}
	for _, tt := range tests {
		t.Run(tt.coverage+" "+strings.Join(tt.values, ","), func(t *testing.T) {
			t.Parallel()
			p := build(t, g, plan.Request{Task: "root", Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: tt.coverage, Values: tt.values},
				Dates: rng("2025-01-01", "2025-01-01")})
			got := slices.Sorted(slices.Values(p.Tasks))
			if !slices.Equal(got, tt.want) {
				t.Errorf("tasks %v, want %v", got, tt.want)
			}
		})
	}

	// Isolated end point: no path, no waiting.
	p := build(t, g, plan.Request{Task: "root", Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverEndPoints, Values: []string{"y.y"}},
		Dates: rng("2025-01-01", "2025-01-01")})
	for _, in := range p.Instances {
		if len(in.Deps) > 0 {
			t.Errorf("isolated end point: %s waits for %v", in.Task, depTasks(p, in))
		}
	}
	// Names and IDs select tasks, not the paths between them: z.end does
	// not wait for r.root (a.a1 and a.a2 are not selected).
	p = build(t, g, plan.Request{Task: "root", Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: plan.CoverIDs, Values: []string{"z.end"}},
		Dates: rng("2025-01-01", "2025-01-01")})
	if in := on(t, p, "z.end", "2025-01-01"); len(in.Deps) != 0 {
		t.Errorf("z.end waits for %v", depTasks(p, in))
	}
}

func TestMassCoverageRefusals(t *testing.T) {
	t.Parallel()
	g := massGraph(t)
	dup := newGraph(t, tk("r.root", "daily"), tk("a.load", "daily", "r.root"), tk("b.load", "daily", "r.root"))
	tests := []struct {
		g        *dag.Graph
		coverage string
		values   []string
		field    string
		parts    []string
	}{
		{g, plan.CoverChildren, []string{"b.b2"}, "scope.values[0]", []string{"not a level-1 child of r.root", "a.a1, b.b1, c.c1"}},
		{g, plan.CoverChildren, []string{"nope"}, "scope.values[0]", []string{`no task has ID or name "nope"`}},
		{g, plan.CoverIDs, []string{"y.y"}, "scope.values[0]", []string{"y.y is not downstream of r.root"}},
		{g, plan.CoverIDs, []string{"a2"}, "scope.values[0]", []string{"is a name"}},
		{g, plan.CoverNames, []string{"y"}, "scope.values[0]", []string{`no task downstream of r.root is named "y"`}},
		{dup, plan.CoverNames, []string{"load"}, "scope.values[0]", []string{"a.load, b.load", `"ids"`}},
		{g, plan.CoverProjects, []string{"nope"}, "scope.values[0]", []string{`no task has project "nope"`}},
		{g, plan.CoverOutputs, nil, "scope.values", []string{"needs values"}},
		{g, plan.CoverDescendants, []string{"x"}, "scope.values", []string{"takes no values"}},
		{g, "", nil, "scope.coverage", []string{"needs a coverage"}},
		{g, "everything", nil, "scope.coverage", []string{`unknown value "everything"`}},
	}
	for _, tt := range tests {
		re := refused(t, tt.g, plan.Request{Task: "r.root", Scope: plan.Scope{Mode: plan.ScopeMass, Coverage: tt.coverage, Values: tt.values},
			Dates: rng("2025-01-01", "2025-01-01")})
		expectRefusal(t, re, tt.field, tt.parts...)
	}
}

func TestListLevels(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.u2", "daily"), tk("p.u1", "daily", "p.u2"), tk("p.r", "daily", "p.u1"),
		tk("p.d1", "daily", "p.r"), tk("p.d2", "daily", "p.d1"), tk("p.d3", "daily", "p.d2"))
	for _, tt := range []struct {
		down, up int
		want     []string
	}{
		{0, 0, []string{"p.r"}},
		{1, 0, []string{"p.r", "p.d1"}},
		{2, 1, []string{"p.u1", "p.r", "p.d1", "p.d2"}},
		{dag.AllLevels, dag.AllLevels, []string{"p.u2", "p.u1", "p.r", "p.d1", "p.d2", "p.d3"}},
	} {
		p := build(t, g, plan.Request{Task: "p.r", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: tt.down, Upstream: tt.up}, Dates: rng("2025-01-01", "2025-01-01")})
		if !slices.Equal(p.Tasks, tt.want) {
			t.Errorf("down %d up %d: %v, want %v", tt.down, tt.up, p.Tasks, tt.want)
		}
	}
}

func TestTimeRange(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tkIn(berlin, "p.h", "hourly"), tkIn(berlin, "p.late", "daily 11:00", "p.h"), tkIn(berlin, "p.early", "daily 01:30", "p.h"))
	req := plan.Request{Task: "p.h", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1},
		Dates: rng("2025-01-01", "2025-01-02"), TimeRange: &plan.TimeRange{From: "10:00", To: "12:00"}}
	p := build(t, g, req)
	hours := of(p, "p.h")
	if len(hours) != 6 {
		t.Fatalf("%d hourly instances, want 3 a day", len(hours))
	}
	for _, in := range hours {
		if h := in.BizTime.In(berlin).Hour(); h < 10 || h > 12 {
			t.Errorf("hourly cycle at %s is outside the range", in.BizTime.In(berlin))
		}
	}
	// Default hourly scope: day-based tasks run regardless, waiting for
	// the planned hours of their date.
	if len(of(p, "p.early")) != 2 || len(on(t, p, "p.late", "2025-01-01").Deps) != 3 {
		t.Errorf("hourly_scope all: tasks %v, p.late deps %v", p.Tasks, on(t, p, "p.late", "2025-01-01").Deps)
	}

	req.HourlyScope = plan.HourlyScopeWithin
	p = build(t, g, req)
	if !slices.Equal(p.Tasks, []string{"p.h", "p.late"}) {
		t.Errorf("hourly_scope within: tasks %v, want the daily task scheduled at 11:00 only", p.Tasks)
	}

	for _, tt := range []struct {
		tr    plan.TimeRange
		field string
	}{
		{plan.TimeRange{From: "25:00", To: "26:00"}, "time_range.from"},
		{plan.TimeRange{From: "10:00", To: "9:00"}, "time_range.to"},
		{plan.TimeRange{From: "12:00", To: "10:00"}, "time_range"},
	} {
		r := req
		r.TimeRange = &tt.tr
		expectRefusal(t, refused(t, g, r), tt.field)
	}
	// A time range needs a minute, hourly or cron task.
	r := req
	r.Task, r.Scope = "p.late", plan.Scope{}
	expectRefusal(t, refused(t, g, r), "time_range", "no selected task")
}

func TestSingleInstance(t *testing.T) {
	t.Parallel()
	fact := with(tk("p.fact", "daily"), func(t *dag.Task) { t.SingleInstance = true })
	g := newGraph(t, tk("p.up", "daily"), with(fact, func(t *dag.Task) { t.Upstream = []string{"p.up"} }), tk("p.down", "daily", "p.fact"))
	req := plan.Request{Task: "p.fact", SingleInstance: true, Dates: rng("2025-01-01", "2025-01-05")}
	p := build(t, g, req)
	if len(p.Instances) != 1 {
		t.Fatalf("%d instances, want 1", len(p.Instances))
	}
	in := p.Instances[0]
	if !in.BizTime.Equal(date("2025-01-01").Midnight(time.UTC)) || !in.BizEnd.Equal(date("2025-01-05").Midnight(time.UTC)) || in.Group != 1 {
		t.Errorf("single instance %s..%s group %d", in.BizTime, in.BizEnd, in.Group)
	}
	if want := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC); !in.Scheduled.Equal(want) {
		t.Errorf("single instance scheduled %s, want %s (the last date's)", in.Scheduled, want)
	}

	// Downstream dates all wait for it.
	req.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	req.Groups = 2
	p = build(t, g, req)
	if len(p.Instances) != 6 {
		t.Fatalf("%d instances", len(p.Instances))
	}
	for _, in := range of(p, "p.down") {
		if got := depTasks(p, in); !slices.Equal(got, []string{"p.fact@2025-01-01"}) {
			t.Errorf("p.down on %s waits for %v", in.Date, got)
		}
	}

	// Without the request flag each date runs alone.
	p = build(t, g, plan.Request{Task: "p.fact", Dates: rng("2025-01-01", "2025-01-05")})
	if len(p.Instances) != 5 {
		t.Errorf("%d instances without single_instance", len(p.Instances))
	}
	// A task that cannot is unaffected.
	p = build(t, g, plan.Request{Task: "p.down", SingleInstance: true, Dates: rng("2025-01-01", "2025-01-05")})
	if len(p.Instances) != 5 || !strings.Contains(strings.Join(p.Warnings, ""), "single_instance") {
		t.Errorf("%d instances, warnings %q", len(p.Instances), p.Warnings)
	}
	// Its upstream runs on later steps than the single instance: refused.
	req = plan.Request{Task: "p.up", SingleInstance: true, Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-01", "2025-01-05")}
	expectRefusal(t, refused(t, g, req), "single_instance", "p.fact", "p.up")
}

func TestHistoryPolicies(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.a", "daily"), tk("p.b", "daily", "p.a"))
	h := history{"p.a": {
		"2025-01-01T00:00:00Z": "succeeded",
		"2025-01-02T00:00:00Z": "failed",
		"2025-01-03T00:00:00Z": "running",
		"2025-01-05T00:00:00Z": "dry_run",
		"2025-01-06T00:00:00Z": "stopped",
	}}
	withHistory := func(in *plan.Input) { in.History = h }
	tests := []struct {
		succeeded, running string
		want               []string
		skipped            int
	}{
		{"", "", []string{"p.a@01-01", "p.a@01-02", "p.a@01-03", "p.a@01-04", "p.a@01-05", "p.a@01-06"}, 0},
		{plan.SucceededSkip, "", []string{"p.a@01-02", "p.a@01-03", "p.a@01-04", "p.a@01-06"}, 2},
		{plan.SucceededFailedOnly, "", []string{"p.a@01-02", "p.a@01-06"}, 4},
		{plan.SucceededRerun, plan.RunningSkip, []string{"p.a@01-01", "p.a@01-02", "p.a@01-04", "p.a@01-05", "p.a@01-06"}, 1},
		{plan.SucceededSkip, plan.RunningSkip, []string{"p.a@01-02", "p.a@01-04", "p.a@01-06"}, 3},
	}
	for _, tt := range tests {
		p := build(t, g, plan.Request{Task: "p.a", Succeeded: tt.succeeded, Running: tt.running, Dates: rng("2025-01-01", "2025-01-06")}, withHistory)
		if !slices.Equal(run(p), tt.want) || p.Skipped != tt.skipped {
			t.Errorf("succeeded=%q running=%q: %v (skipped %d), want %v (skipped %d)", tt.succeeded, tt.running, run(p), p.Skipped, tt.want, tt.skipped)
		}
	}
	p := build(t, g, plan.Request{Task: "p.a", Dates: rng("2025-01-01", "2025-01-06")}, withHistory)
	if !strings.Contains(strings.Join(p.Warnings, ""), "1 task dates have a run in progress") {
		t.Errorf("warnings %q", p.Warnings)
	}

	// A left-out upstream cycle counts as done.
	p = build(t, g, plan.Request{Task: "p.a", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Succeeded: plan.SucceededSkip,
		Dates: rng("2025-01-01", "2025-01-02")}, withHistory)
	if !slices.Equal(run(p), []string{"p.b@01-01", "p.a@01-02", "p.b@01-02"}) {
		t.Fatalf("plan %v", run(p))
	}
	if in := on(t, p, "p.b", "2025-01-01"); len(in.Deps) != 0 {
		t.Errorf("p.b on 01-01 waits for %v though p.a succeeded", depTasks(p, in))
	}
	if got := depTasks(p, on(t, p, "p.b", "2025-01-02")); !slices.Equal(got, []string{"p.a@2025-01-02"}) {
		t.Errorf("p.b on 01-02 waits for %v", got)
	}

	// Nothing left: refused.
	re := refused(t, g, plan.Request{Task: "p.a", Succeeded: plan.SucceededSkip, Dates: rng("2025-01-01", "2025-01-01")}, withHistory)
	expectRefusal(t, re, "succeeded", "nothing to backfill")
}

func TestNoCycleYet(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tkIn(berlin, "p.a", "daily"), tkIn(berlin, "p.h", "hourly"), tkIn(berlin, "p.m", "monthly 1"))
	clock := at(time.Date(2026, 12, 1, 10, 0, 0, 0, berlin))
	req := func(task string, d plan.Dates) plan.Request { return plan.Request{Task: task, Dates: d} }

	re := refused(t, g, req("p.a", rng("2026-11-29", "2026-12-01")), clock)
	expectRefusal(t, re, "dates.to", "data timestamp 2026-12-01 of task p.a has no cycle yet: it is scheduled 2026-12-02 00:00 CET; pick dates up to 2026-11-30")
	build(t, g, req("p.a", rng("2026-11-29", "2026-11-30")), clock)

	// Far in the future: the first date with a cycle is named.
	re = refused(t, g, req("p.a", rng("2026-11-29", "2040-01-01")), clock)
	expectRefusal(t, re, "dates.to", "data timestamp 2026-12-01", "pick dates up to 2026-11-30")
	re = refused(t, g, req("p.a", plan.Dates{Mode: plan.DatesCustom, List: dates("2026-11-01", "2031-05-05")}), clock)
	expectRefusal(t, re, "dates.list", "data timestamp 2031-05-05")

	// With a later start_at (here as its deprecated alias run_at), the
	// dates up to its date are allowed (their cycles may be due after it,
	// as the reference allows).
	runAt := time.Date(2026, 12, 2, 12, 0, 0, 0, berlin)
	r := req("p.a", rng("2026-11-29", "2026-12-01"))
	r.RunAt = &runAt
	p := build(t, g, r, clock)
	if !p.RunAt.Equal(runAt) {
		t.Errorf("RunAt %s", p.RunAt)
	}
	r.Dates.To = date("2026-12-02")
	build(t, g, r, clock)
	r.Dates.To = date("2026-12-03")
	expectRefusal(t, refused(t, g, r, clock), "dates.to", "2026-12-03 of task p.a", "pick dates up to 2026-12-02")

	// Hourly: the cycles of today that are due are not enough.
	re = refused(t, g, req("p.h", rng("2026-12-01", "2026-12-01")), clock)
	expectRefusal(t, re, "dates.to", "2026-12-01 of task p.h has no cycle yet: it is scheduled 2026-12-01 11:00 CET", "pick dates up to 2026-11-30")

	// Monthly: dates after now without a cycle leave quietly, one with a
	// cycle is refused.
	later := at(time.Date(2026, 12, 10, 10, 0, 0, 0, berlin))
	p = build(t, g, req("p.m", rng("2026-12-01", "2026-12-31")), later)
	if !slices.Equal(p.Dates, dates("2026-12-01")) {
		t.Errorf("monthly: dates %v", p.Dates)
	}
	re = refused(t, g, req("p.m", rng("2026-12-01", "2027-01-01")), later)
	expectRefusal(t, re, "dates.to", "2027-01-01 of task p.m", "scheduled 2027-01-02 00:00 CET")
}

func TestConfirmation(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.a", "daily"), tk("p.b", "daily", "p.a"), tk("p.c", "daily", "p.b"), tk("p.h", "hourly"), tk("p.h2", "hourly", "p.h"))
	small := func(in *plan.Input) { in.ConfirmAbove = 10 }
	req := plan.Request{Task: "p.a", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: dag.AllLevels}, Dates: rng("2025-01-01", "2025-01-04")}
	expectRefusal(t, refused(t, g, req, small), "confirm", "12 instances", "more than 10", "set confirm")
	req.Confirm = true
	build(t, g, req, small)

	// Default threshold: 10,000. No one-year limit: two years of one
	// hourly task are fine once confirmed.
	year := plan.Request{Task: "p.h", Dates: rng("2024-01-01", "2024-12-31")}
	if p := build(t, g, year); len(p.Instances) != 8784 {
		t.Errorf("%d hourly instances in 2024", len(p.Instances))
	}
	year.Scope = plan.Scope{Mode: plan.ScopeList, Downstream: 1}
	expectRefusal(t, refused(t, g, year), "confirm", "17568 instances", "more than 10000")
	two := plan.Request{Task: "p.h", Dates: rng("2023-01-01", "2024-12-31"), Confirm: true}
	build(t, g, two)

	// Left-out instances do not count.
	h := history{"p.a": {"2025-01-01T00:00:00Z": "succeeded", "2025-01-02T00:00:00Z": "succeeded"}}
	req.Confirm, req.Succeeded = false, plan.SucceededSkip
	build(t, g, req, small, func(in *plan.Input) { in.History = h })
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("a.load", "daily"), tk("b.load", "daily"), tk("p.x", "daily"))
	day := rng("2025-01-01", "2025-01-01")
	past := now.Add(-time.Minute)
	tests := []struct {
		name  string
		req   plan.Request
		field string
		parts []string
	}{
		{"no task", plan.Request{Dates: day}, "task", []string{"name the task"}},
		{"unknown task", plan.Request{Task: "p.y", Dates: day}, "task", []string{`no task has ID or name "p.y"`, `did you mean "p.x"`}},
		{"ambiguous task", plan.Request{Task: "load", Dates: day}, "task", []string{"a.load, b.load"}},
		{"start_at now", plan.Request{Task: "p.x", Dates: day, StartAt: &now}, "start_at", []string{"not in the future"}},
		{"run_at past", plan.Request{Task: "p.x", Dates: day, RunAt: &past}, "start_at", []string{"not in the future"}}, // the deprecated alias
		{"start_at and run_at differ", plan.Request{Task: "p.x", Dates: day, StartAt: &now, RunAt: &past}, "start_at", []string{"differ", "send start_at only"}},
		{"to before from", plan.Request{Task: "p.x", Dates: rng("2025-01-02", "2025-01-01")}, "dates.to", []string{"before dates.from"}},
		{"no from", plan.Request{Task: "p.x", Dates: plan.Dates{To: date("2025-01-01")}}, "dates.from", []string{"required"}},
		{"before 1900", plan.Request{Task: "p.x", Dates: rng("1899-12-31", "1900-01-01")}, "dates.from", []string{"1900-01-01"}},
		{"not a date", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCustom, List: []calendar.Date{{Year: 2025, Month: 2, Day: 30}}}}, "dates.list[0]", []string{"not a date"}},
		{"empty custom", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCustom}}, "dates.list", []string{"empty"}},
		{"custom with from", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCustom, From: date("2025-01-01"), List: dates("2025-01-01")}}, "dates.from", nil},
		{"list outside custom", plan.Request{Task: "p.x", Dates: plan.Dates{From: date("2025-01-01"), To: date("2025-01-01"), List: dates("2025-01-01")}}, "dates.list", nil},
		{"empty cycle", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCycle, From: date("2025-02-01"), To: date("2025-02-28"), MonthDays: []int{30}}}, "dates", []string{"no date from 2025-02-01 to 2025-02-28", "day 30"}},
		{"cycle without days", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCycle, From: date("2025-02-01"), To: date("2025-02-28")}}, "dates.weekdays", nil},
		{"weekday 7", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCycle, From: date("2025-02-01"), To: date("2025-02-28"), Weekdays: []time.Weekday{7}}}, "dates.weekdays", nil},
		{"month day 32", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: plan.DatesCycle, From: date("2025-02-01"), To: date("2025-02-28"), MonthDays: []int{32}}}, "dates.month_days", nil},
		{"weekdays in range mode", plan.Request{Task: "p.x", Dates: plan.Dates{From: date("2025-02-01"), To: date("2025-02-28"), Weekdays: []time.Weekday{1}}}, "dates.mode", nil},
		{"groups 13", plan.Request{Task: "p.x", Dates: day, Groups: 13}, "groups", []string{"1 to 12"}},
		{"groups -1", plan.Request{Task: "p.x", Dates: day, Groups: -1}, "groups", nil},
		{"order", plan.Request{Task: "p.x", Dates: day, Order: "up"}, "order", []string{`unknown value "up"`, "asc, desc"}},
		{"paused", plan.Request{Task: "p.x", Dates: day, Paused: "skip"}, "paused", nil},
		{"dry_run", plan.Request{Task: "p.x", Dates: day, DryRun: "x"}, "dry_run", nil},
		{"hourly_scope", plan.Request{Task: "p.x", Dates: day, HourlyScope: "x"}, "hourly_scope", nil},
		{"succeeded", plan.Request{Task: "p.x", Dates: day, Succeeded: "x"}, "succeeded", nil},
		{"running", plan.Request{Task: "p.x", Dates: day, Running: "x"}, "running", nil},
		{"dates.mode", plan.Request{Task: "p.x", Dates: plan.Dates{Mode: "x"}}, "dates.mode", nil},
		{"scope.mode", plan.Request{Task: "p.x", Dates: day, Scope: plan.Scope{Mode: "x"}}, "scope.mode", nil},
		{"levels 11", plan.Request{Task: "p.x", Dates: day, Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 11}}, "scope.downstream", nil},
		{"levels -2", plan.Request{Task: "p.x", Dates: day, Scope: plan.Scope{Mode: plan.ScopeList, Upstream: -2}}, "scope.upstream", nil},
		{"levels outside list", plan.Request{Task: "p.x", Dates: day, Scope: plan.Scope{Downstream: 1}}, "scope.mode", nil},
		{"coverage outside mass", plan.Request{Task: "p.x", Dates: day, Scope: plan.Scope{Mode: plan.ScopeList, Coverage: plan.CoverDescendants}}, "scope.coverage", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			expectRefusal(t, refused(t, g, tt.req), tt.field, tt.parts...)
		})
	}
	if _, err := plan.Build(plan.Input{Request: plan.Request{Task: "p.x"}, Now: now}); err == nil {
		t.Error("Build without a graph")
	}
	if _, err := plan.Build(plan.Input{Graph: g, Request: plan.Request{Task: "p.x", Dates: day}}); err == nil {
		t.Error("Build without a clock")
	}
}

func TestNameAndResourceGroup(t *testing.T) {
	t.Parallel()
	g := newGraph(t, with(tk("p.load_orders", "daily"), func(t *dag.Task) { t.ResourceGroup = "etl" }))
	day := rng("2025-01-01", "2025-01-01")
	p := build(t, g, plan.Request{Task: "load_orders", Dates: day}, func(in *plan.Input) { in.Sequence = 3 })
	if p.Name != "load_orders_20250601_3" || p.Task != "p.load_orders" || !p.RunAt.Equal(now) {
		t.Errorf("name %q, task %q, run at %s", p.Name, p.Task, p.RunAt)
	}
	if p.Instances[0].ResourceGroup != "etl" {
		t.Errorf("resource group %q", p.Instances[0].ResourceGroup)
	}
	p = build(t, g, plan.Request{Task: "load_orders", Name: "fix", ResourceGroup: "big", Dates: day}, func(in *plan.Input) { in.Sequence = 0 })
	if p.Name != "fix" || p.Instances[0].ResourceGroup != "big" {
		t.Errorf("name %q, resource group %q", p.Name, p.Instances[0].ResourceGroup)
	}
	p = build(t, g, plan.Request{Task: "load_orders", Dates: day}, func(in *plan.Input) { in.Sequence = 0 })
	if p.Name != "load_orders_20250601_1" {
		t.Errorf("name %q", p.Name)
	}
}

func TestMixedTimeZones(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	// Day-based tasks match by business date whatever their zones.
	g := newGraph(t, tkIn(tokyo, "p.t", "daily"), tkIn(berlin, "p.b", "daily", "p.t"), tkIn(tokyo, "p.h", "hourly"), tkIn(berlin, "p.d", "daily", "p.h"))
	p := build(t, g, plan.Request{Task: "p.t", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-01", "2025-01-03")})
	for _, d := range []string{"2025-01-01", "2025-01-02", "2025-01-03"} {
		if got := depTasks(p, on(t, p, "p.b", d)); !slices.Equal(got, []string{"p.t@" + d}) {
			t.Errorf("p.b on %s waits for %v", d, got)
		}
	}
	p = build(t, g, plan.Request{Task: "p.h", Scope: plan.Scope{Mode: plan.ScopeList, Downstream: 1}, Dates: rng("2025-01-01", "2025-01-02")})
	if in := on(t, p, "p.d", "2025-01-02"); len(in.Deps) != 24 {
		t.Errorf("p.d waits for %d hours of Tokyo", len(in.Deps))
	}
}

func TestNoCycleOnDates(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.w", "weekly mon"), tk("p.m", "monthly 1"))
	// Tuesday to Sunday: no Monday.
	re := refused(t, g, plan.Request{Task: "p.w", Dates: rng("2025-01-07", "2025-01-12")})
	expectRefusal(t, re, "dates", "no selected task has a cycle on the selected dates (2025-01-07, 2025-01-08")
	// Only dates after now, none with a cycle.
	re = refused(t, g, plan.Request{Task: "p.m", Dates: rng("2025-06-10", "2025-06-20")})
	expectRefusal(t, re, "dates", "no selected task has a cycle on the selected dates; check")
	// A week: Monday only, the others left out with a warning.
	p := build(t, g, plan.Request{Task: "p.w", Dates: rng("2025-01-06", "2025-01-12"), Groups: 3})
	if !slices.Equal(p.Dates, dates("2025-01-06")) || len(p.Groups) != 1 || !strings.Contains(strings.Join(p.Warnings, "\n"), "6 selected dates have no cycle") {
		t.Errorf("dates %v, groups %v, warnings %q", p.Dates, p.Groups, p.Warnings)
	}
}
