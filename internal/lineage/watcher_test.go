package lineage

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// watchEnv is a real store and batch engine with one task reading
// public.sales by day, and a watcher on a clock the test moves.
type watchEnv struct {
	t      *testing.T
	st     *store.Store
	e      *engine.Engine
	w      *Watcher
	events <-chan engine.Event
	now    time.Time
	dir    string
}

func newWatchEnv(t *testing.T, command string, oc dag.OnChange) *watchEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(t.Context(), "sqlite://"+filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sched, _ := calendar.Parse("daily", time.UTC)
	task := dag.Task{ID: "sales.daily", Name: "daily", Project: "sales", Type: dag.TypeShell, Command: command, Schedule: sched,
		ResourceGroup: "default", OnChange: &oc,
		Reads: []dag.Read{{Stream: "shop", Object: "public.sales", Table: change.TableID{Schema: "public", Name: "sales"}, DateColumn: "day", Location: time.UTC,
			LateAfter: 24 * time.Hour}}}
	g, err := dag.New([]dag.Task{task})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{Store: st, Graph: g, ResourceGroups: map[string]int{"default": 4}, WorkDir: dir,
		Logger: slog.New(slog.DiscardHandler), LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.Getenv("PATH"), true
			}
			return "", false
		}})
	if err != nil {
		t.Fatal(err)
	}
	events, unsubscribe := e.Subscribe()
	t.Cleanup(unsubscribe)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-e.Ready()
	v := &watchEnv{t: t, st: st, e: e, events: events, now: time.Date(2026, 3, 20, 9, 0, 0, 0, time.UTC), dir: dir}
	v.w = &Watcher{Store: st, Batch: e, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return v.now }}
	return v
}

// ran runs the task for 2026-03-01 to 03-10 and waits for it.
func (v *watchEnv) ran() {
	v.t.Helper()
	req := plan.Request{Task: "sales.daily", Dates: plan.Dates{From: date("2026-03-01"), To: date("2026-03-10")}}
	bb, err := v.e.Submit(v.t.Context(), req, "test", nil)
	if err != nil {
		v.t.Fatal(err)
	}
	v.ended(bb.ID)
}

// ended waits for batch backfill id to end.
func (v *watchEnv) ended(id int64) {
	v.t.Helper()
	timeout := time.After(time.Minute)
	for {
		if bb, err := v.st.GetBatchBackfill(v.t.Context(), id); err == nil && bb.State != store.BatchWaiting && bb.State != store.BatchRunning {
			return
		}
		select {
		case <-v.events:
		case <-timeout:
			v.t.Fatalf("batch backfill %d did not end", id)
		}
	}
}

// changed records an ended stream backfill that changed days, finished
// now.
func (v *watchEnv) changed(days ...string) int64 {
	v.t.Helper()
	return v.changedAt(time.Now(), days...)
}

// changedAt records an ended stream backfill that changed days, finished
// at finished.
func (v *watchEnv) changedAt(finished time.Time, days ...string) int64 {
	v.t.Helper()
	bf := store.Backfill{Stream: "shop", Schema: "public", Table: "sales", StartedBy: "repair"}
	if err := v.st.CreateBackfill(v.t.Context(), &bf); err != nil {
		v.t.Fatal(err)
	}
	var ds []store.ChangedDate
	for _, d := range days {
		ds = append(ds, store.ChangedDate{Stream: "shop", BackfillID: bf.ID, Object: "public.sales", Column: "day", Value: d})
	}
	if err := v.st.RecordChangedDates(v.t.Context(), ds); err != nil {
		v.t.Fatal(err)
	}
	bf.Status, bf.FinishedAt, bf.LoadedAt = store.StatusCompleted, &finished, &finished
	if err := v.st.UpdateBackfill(v.t.Context(), bf); err != nil {
		v.t.Fatal(err)
	}
	return bf.ID
}

func (v *watchEnv) tick() {
	v.t.Helper()
	if err := v.w.Tick(v.t.Context()); err != nil {
		v.t.Fatal(err)
	}
}

// lineageRuns are the batch backfills the watcher submitted, oldest first.
func (v *watchEnv) lineageRuns() []store.BatchBackfill {
	v.t.Helper()
	bbs, err := v.st.ListBatchBackfills(v.t.Context(), store.BatchBackfillFilter{Task: "sales.daily", Limit: 100})
	if err != nil {
		v.t.Fatal(err)
	}
	var out []store.BatchBackfill
	for _, bb := range bbs {
		if strings.HasPrefix(bb.Name, "lineage_") {
			out = append(out, bb)
		}
	}
	slices.Reverse(out)
	return out
}

// dates are the business dates of a batch backfill's instances.
func (v *watchEnv) dates(id int64) string {
	v.t.Helper()
	insts, err := v.st.ListBatchInstances(v.t.Context(), store.BatchInstanceFilter{BackfillID: id})
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, in := range insts {
		out = append(out, in.BizTime.Format("01-02"))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func date(s string) calendar.Date {
	d, err := calendar.ParseDate(s)
	if err != nil {
		panic(err)
	}
	return d
}

// TestWatcherSettles: changes within the settle time merge into one run
// after it; dates the task never ran are left out.
func TestWatcherSettles(t *testing.T) {
	v := newWatchEnv(t, "true", dag.OnChange{Action: dag.OnChangeRun, Settle: 10 * time.Minute, MaxPerDay: 3})
	v.ran()
	v.changed("2026-03-04", "2026-04-01") // April never ran
	v.tick()
	v.now = v.now.Add(5 * time.Minute)
	v.changed("2026-03-04", "2026-03-06")
	v.changed("2026-03-06")
	v.tick()
	v.now = v.now.Add(9 * time.Minute) // 14 minutes after the first, 9 after the last
	v.tick()
	if runs := v.lineageRuns(); len(runs) != 0 {
		t.Fatalf("submitted before the changes settled: %+v", runs)
	}
	v.now = v.now.Add(2 * time.Minute)
	v.tick()
	runs := v.lineageRuns()
	if len(runs) != 1 || runs[0].StartedBy != StartedBy {
		t.Fatalf("runs after settling: %+v, want one by lineage", runs)
	}
	v.ended(runs[0].ID)
	if got := v.dates(runs[0].ID); got != "03-04 03-06" {
		t.Fatalf("the run's dates: %s, want 03-04 03-06", got)
	}
	ps, _ := v.st.ListProposals(t.Context(), "", 0)
	if len(ps) != 1 || len(ps[0].Causes) != 3 || ps[0].State != store.ProposalSubmitted {
		t.Fatalf("proposals %+v, want one submitted, caused by the 3 backfills", ps)
	}
}

// TestWatcherQueuesAfterARunningOne: changes that arrive while the task's
// re-run runs wait for it, then run once more.
func TestWatcherQueuesAfterARunningOne(t *testing.T) {
	// Once the gate file exists, a run waits for the go file.
	v := newWatchEnv(t, `[ ! -f gate ] || while [ ! -f go ]; do sleep 0.02; done`, dag.OnChange{Action: dag.OnChangeRun, MaxPerDay: 3})
	v.ran()
	if err := os.WriteFile(filepath.Join(v.dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v.changed("2026-03-04")
	v.tick()
	first := v.lineageRuns()
	if len(first) != 1 {
		t.Fatalf("runs: %+v, want one", first)
	}
	v.changed("2026-03-04")
	v.changed("2026-03-08")
	v.tick()
	v.tick()
	if runs := v.lineageRuns(); len(runs) != 1 {
		t.Fatalf("a second run started while the first runs: %+v", runs)
	}
	if err := os.WriteFile(filepath.Join(v.dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v.ended(first[0].ID)
	v.tick()
	runs := v.lineageRuns()
	if len(runs) != 2 {
		t.Fatalf("runs after the first ended: %+v, want exactly one more", runs)
	}
	v.ended(runs[1].ID)
	if got := v.dates(runs[1].ID); got != "03-04 03-08" {
		t.Fatalf("the second run's dates: %s", got)
	}
}

// TestWatcherCap: past max_per_day, the changes wait for a person in one
// proposal saying why; an approval runs them.
func TestWatcherCap(t *testing.T) {
	v := newWatchEnv(t, "true", dag.OnChange{Action: dag.OnChangeRun, MaxPerDay: 1})
	v.ran()
	v.changed("2026-03-02")
	v.tick()
	v.ended(v.lineageRuns()[0].ID)
	v.changed("2026-03-03")
	v.tick()
	v.changed("2026-03-05")
	v.tick()
	if runs := v.lineageRuns(); len(runs) != 1 {
		t.Fatalf("runs past the cap: %+v", runs)
	}
	ps, _ := v.st.ListProposals(t.Context(), store.ProposalPending, 0)
	if len(ps) != 1 || ps[0].Auto || !strings.Contains(ps[0].Note, "max_per_day") || len(ps[0].Times) != 2 {
		t.Fatalf("pending past the cap: %+v, want one held proposal of 2 dates saying why", ps)
	}
	p, err := v.w.Approve(t.Context(), ps[0].ID, "cli:ops")
	if err != nil || p.State != store.ProposalSubmitted || p.DecidedBy != "cli:ops" {
		t.Fatalf("approve: %+v, %v", p, err)
	}
	v.ended(p.BatchBackfillID)
	// The next day the cap starts again.
	v.now = v.now.Add(24 * time.Hour)
	v.changed("2026-03-07")
	v.tick()
	if runs := v.lineageRuns(); len(runs) != 3 {
		t.Fatalf("runs the next day: %d, want 3", len(runs))
	}
}

// TestWatcherSubmitsOnceAcrossACrash: a batch backfill submitted just
// before a crash, before its proposal was marked, is found by its name
// after the restart, not submitted again.
func TestWatcherSubmitsOnceAcrossACrash(t *testing.T) {
	v := newWatchEnv(t, "true", dag.OnChange{Action: dag.OnChangeRun, Settle: time.Minute, MaxPerDay: 3})
	v.ran()
	v.changed("2026-03-04")
	v.tick()
	ps, _ := v.st.ListProposals(t.Context(), store.ProposalPending, 0)
	if len(ps) != 1 {
		t.Fatalf("proposals %+v", ps)
	}
	task, _ := v.e.Graph().Task("sales.daily")
	req, err := Request(task, ps[0])
	if err != nil {
		t.Fatal(err)
	}
	bb, err := v.e.Submit(t.Context(), req, StartedBy, nil) // the crash came right after this
	if err != nil {
		t.Fatal(err)
	}
	v.now = v.now.Add(2 * time.Minute)
	v.tick()
	runs := v.lineageRuns()
	p, _ := v.st.GetProposal(t.Context(), ps[0].ID)
	if len(runs) != 1 || p.State != store.ProposalSubmitted || p.BatchBackfillID != bb.ID {
		t.Fatalf("after the restart: runs %+v, proposal %+v; want the one batch backfill %d", runs, p, bb.ID)
	}
}

// TestWatcherLeavesRunsAfterTheChange: a cycle whose only run started after
// the backfill that changed it ended read the new rows: nothing to re-run.
func TestWatcherLeavesRunsAfterTheChange(t *testing.T) {
	v := newWatchEnv(t, "true", dag.OnChange{Action: dag.OnChangePropose, MaxPerDay: 3})
	before := time.Now().Add(-time.Second)
	v.ran()
	v.changedAt(before, "2026-03-04")
	v.tick()
	if ps, _ := v.st.ListProposals(t.Context(), "", 0); len(ps) != 0 {
		t.Fatalf("proposals for a cycle run after the change: %+v", ps)
	}
	v.changed("2026-03-04")
	v.tick()
	if ps, _ := v.st.ListProposals(t.Context(), store.ProposalPending, 0); len(ps) != 1 || ps[0].Auto {
		t.Fatalf("proposals for a cycle run before the change: %+v, want one to approve", ps)
	}
}

// late records late data, as a stream does, for days.
func (v *watchEnv) late(days ...string) {
	v.t.Helper()
	var ds []store.ChangedDate
	for _, d := range days {
		ds = append(ds, store.ChangedDate{Stream: "shop", Object: "public.sales", Column: "day", Value: d})
	}
	if err := v.st.RecordLateDates(v.t.Context(), ds); err != nil {
		v.t.Fatal(err)
	}
}

// TestWatcherLateData: late data to one date three times within the
// settle time makes one run after it; late data while that run runs makes
// exactly one more after it; the causes say late data.
func TestWatcherLateData(t *testing.T) {
	v := newWatchEnv(t, `[ ! -f gate ] || while [ ! -f go ]; do sleep 0.02; done`,
		dag.OnChange{Action: dag.OnChangeRun, Settle: 10 * time.Minute, MaxPerDay: 3})
	v.ran()
	if err := os.WriteFile(filepath.Join(v.dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		v.late("2026-03-04")
		v.tick()
		v.now = v.now.Add(3 * time.Minute)
	}
	if runs := v.lineageRuns(); len(runs) != 0 {
		t.Fatalf("ran before settling: %+v", runs)
	}
	v.now = v.now.Add(8 * time.Minute) // 11 minutes after the last
	v.tick()
	first := v.lineageRuns()
	if len(first) != 1 {
		t.Fatalf("runs: %+v, want one", first)
	}
	ps, _ := v.st.ListProposals(t.Context(), store.ProposalSubmitted, 0)
	if len(ps) != 1 || len(ps[0].Causes) != 1 || ps[0].Causes[0].StartedBy != LateCause || ps[0].Causes[0].BackfillID != 0 {
		t.Fatalf("the proposal %+v: want one late data cause, the same three times", ps)
	}
	v.late("2026-03-04")
	v.tick() // handed over: due in 10 minutes
	v.now = v.now.Add(11 * time.Minute)
	v.tick()
	if runs := v.lineageRuns(); len(runs) != 1 {
		t.Fatalf("another run started while the first runs: %+v", runs)
	}
	if err := os.WriteFile(filepath.Join(v.dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	v.ended(first[0].ID)
	v.tick()
	if runs := v.lineageRuns(); len(runs) != 2 {
		t.Fatalf("runs after the first ended: %+v, want exactly one more", runs)
	}
}

// TestWatcherHoldsARefusedRun: a batch backfill the planner refuses (here:
// every date already succeeded, and the options skip those) is not tried
// again each tick: the proposal waits for a person, saying why.
func TestWatcherHoldsARefusedRun(t *testing.T) {
	v := newWatchEnv(t, "true", dag.OnChange{Action: dag.OnChangeRun, MaxPerDay: 3, Backfill: []byte(`{"succeeded": "skip"}`)})
	v.ran()
	v.changed("2026-03-04")
	v.tick()
	v.tick()
	ps, _ := v.st.ListProposals(t.Context(), store.ProposalPending, 0)
	if len(ps) != 1 || ps[0].Auto || !strings.Contains(ps[0].Note, "the batch backfill was refused (succeeded: nothing to backfill") {
		t.Fatalf("proposals %+v, want one held saying the batch backfill was refused", ps)
	}
	if runs := v.lineageRuns(); len(runs) != 0 {
		t.Fatalf("runs %+v", runs)
	}
}

// TestWatcherLateDataByRead: late data is judged again by each read's own
// late_after when handed over: a value recorded for a shorter late_after
// elsewhere is not late for this read, and proposes nothing.
func TestWatcherLateDataByRead(t *testing.T) {
	v := newWatchEnv(t, "true", dag.OnChange{Action: dag.OnChangePropose, MaxPerDay: 3})
	v.ran()
	v.late(time.Now().UTC().Format("2006-01-02")) // today: not late by 24h
	v.tick()
	if ps, _ := v.st.ListProposals(t.Context(), "", 0); len(ps) != 0 {
		t.Fatalf("proposals for a value this read does not find late: %+v", ps)
	}
	if late, _ := v.st.LateDates(t.Context()); len(late) != 0 {
		t.Fatalf("late data not handed over: %+v", late)
	}
}
