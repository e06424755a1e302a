package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/engine"
	"github.com/tidemark/tidemark/internal/store"
)

// clock is a fixed clock that tests move.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func testProgress(tty bool) (*progress, *bytes.Buffer, *clock) {
	var buf bytes.Buffer
	c := &clock{t: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	p := newProgress(&buf, tty)
	p.now = c.now
	p.barWidth = 10
	return p, &buf, c
}

func rowsItem(done int64, status string) progressItem {
	return progressItem{Key: "1", Label: "backfill 1 of public.t", Done: done, Unit: "rows written", Rate: "rows",
		Detail: []string{thousands(done) + " read"}, Status: status, Ended: status == "completed"}
}

func groupItem(grp string, done, total int64, status string) progressItem {
	return progressItem{Key: grp, Label: "group " + grp, Done: done, Total: total, Unit: "ended", Rate: "instances",
		Detail: []string{"1 running"}, Status: status, Ended: done == total}
}

func TestProgressTerminal(t *testing.T) {
	p, buf, c := testProgress(true)
	p.update([]progressItem{groupItem("1", 0, 40, "running"), groupItem("12", 0, 20, "waiting")})
	want := "\r\033[Kgroup 1   [          ]  0/40 ended (0%)  1 running  running\n" +
		"\r\033[Kgroup 12  [          ]  0/20 ended (0%)  1 running  waiting\n"
	if got := buf.String(); got != want {
		t.Fatalf("first draw:\n%q\nwant\n%q", got, want)
	}

	// 10 of group 1 in 5 seconds: 2 a second, 30 left, ETA 15s. The redraw
	// goes back up the two lines it drew.
	buf.Reset()
	c.advance(5 * time.Second)
	p.update([]progressItem{groupItem("1", 10, 40, "running"), groupItem("12", 0, 20, "waiting")})
	want = "\033[2A" +
		"\r\033[Kgroup 1   [==        ]  10/40 ended (25%)  1 running  2.00 instances/s  ETA 15s  running\n" +
		"\r\033[Kgroup 12  [          ]  0/20 ended (0%)  1 running  0.00 instances/s  waiting\n"
	if got := buf.String(); got != want {
		t.Fatalf("second draw:\n%q\nwant\n%q", got, want)
	}

	// Within the redraw interval and no status changed: nothing drawn.
	buf.Reset()
	c.advance(50 * time.Millisecond)
	p.update([]progressItem{groupItem("1", 11, 40, "running"), groupItem("12", 0, 20, "waiting")})
	if buf.Len() != 0 {
		t.Fatalf("redrawn within the interval: %q", buf.String())
	}
	// Nor for a status change; the next update after the interval draws it.
	c.advance(50 * time.Millisecond)
	p.update([]progressItem{groupItem("1", 11, 40, "running"), groupItem("12", 0, 20, "running")})
	if buf.Len() != 0 {
		t.Fatalf("redrawn within the interval: %q", buf.String())
	}
	c.advance(150 * time.Millisecond)
	p.update([]progressItem{groupItem("1", 11, 40, "running"), groupItem("12", 0, 20, "running")})
	if !strings.Contains(buf.String(), "group 12  [          ]  0/20 ended (0%)  1 running  0.00 instances/s  running\n") {
		t.Fatalf("status change not drawn: %q", buf.String())
	}

	// Fewer lines than before: the rest is erased. An ended item has no
	// rate or ETA.
	buf.Reset()
	c.advance(time.Second)
	p.final([]progressItem{groupItem("1", 40, 40, "done")})
	want = "\033[2A\r\033[Kgroup 1  [==========]  40/40 ended (100%)  1 running  done\n\033[J"
	if got := buf.String(); got != want {
		t.Fatalf("final draw:\n%q\nwant\n%q", got, want)
	}
}

func TestProgressTerminalNoTotal(t *testing.T) {
	p, buf, c := testProgress(true)
	p.width = 60
	p.update([]progressItem{rowsItem(0, "pending")})
	c.advance(2 * time.Second)
	buf.Reset()
	p.update([]progressItem{rowsItem(2500, "active")})
	// No total: no bar and no ETA; the line is cut to the width.
	line := "backfill 1 of public.t  2,500 rows written  2,500 read  1,250 rows/s  active"
	want := "\033[1A\r\033[K" + line[:59] + "\n"
	if got := buf.String(); got != want {
		t.Fatalf("draw:\n%q\nwant\n%q", got, want)
	}
}

func TestProgressRateWindow(t *testing.T) {
	p, buf, c := testProgress(true)
	p.window = 10 * time.Second
	for i := range 30 {
		p.update([]progressItem{rowsItem(int64(i)*100, "active")})
		c.advance(time.Second)
	}
	// 100 rows a second throughout.
	if !strings.Contains(lastLine(buf.String()), "100 rows/s") {
		t.Fatalf("steady rate: %q", lastLine(buf.String()))
	}
	// Stalled: the rate falls as the window slides past the progress.
	for range 5 {
		p.update([]progressItem{rowsItem(2900, "active")})
		c.advance(time.Second)
	}
	p.update([]progressItem{rowsItem(2900, "active")})
	if got := lastLine(buf.String()); !strings.Contains(got, "40.0 rows/s") {
		t.Fatalf("after 6 stalled seconds of a 10 second window: %q", got)
	}
	for range 10 {
		c.advance(time.Second)
		p.update([]progressItem{rowsItem(2900, "active")})
	}
	if got := lastLine(buf.String()); !strings.Contains(got, "0.00 rows/s") {
		t.Fatalf("stalled for the whole window: %q", got)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestProgressPlain(t *testing.T) {
	p, buf, c := testProgress(false)
	p.update([]progressItem{rowsItem(0, "pending")})
	c.advance(time.Second)
	p.update([]progressItem{rowsItem(0, "active")})
	c.advance(time.Second)
	p.update([]progressItem{rowsItem(100, "active")}) // progress, but within 10s: no line
	c.advance(5 * time.Second)
	p.update([]progressItem{rowsItem(600, "active")})
	c.advance(4 * time.Second)
	p.update([]progressItem{rowsItem(1000, "active")}) // 10s after the last line
	c.advance(time.Second)
	p.update([]progressItem{rowsItem(1000, "active")}) // no progress: no line
	c.advance(30 * time.Second)
	p.update([]progressItem{rowsItem(1000, "active")})
	p.final([]progressItem{rowsItem(1200, "completed")})
	want := `15:04:05 backfill 1 of public.t: pending, 0 rows written, 0 read
15:04:06 backfill 1 of public.t: active, 0 rows written, 0 read, 0.00 rows/s
15:04:16 backfill 1 of public.t: active, 1,000 rows written, 1,000 read, 100 rows/s
15:04:47 backfill 1 of public.t: completed, 1,200 rows written, 1,200 read
`
	if got := buf.String(); got != want {
		t.Fatalf("plain:\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(buf.String(), "\033") {
		t.Fatal("escape sequences off a terminal")
	}
}

func TestProgressPlainTenths(t *testing.T) {
	p, buf, c := testProgress(false)
	for _, done := range []int64{0, 3, 9, 10, 11, 19, 25, 99, 100} {
		status := "running"
		if done == 100 {
			status = "done"
		}
		p.update([]progressItem{groupItem("1", done, 100, status)})
		c.advance(time.Second)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var got []string
	for _, l := range lines {
		_, rest, _ := strings.Cut(l, ": ")
		got = append(got, strings.Split(rest, ", ")[1])
	}
	want := []string{"0/100 ended (0%)", "10/100 ended (10%)", "25/100 ended (25%)", "99/100 ended (99%)", "100/100 ended (100%)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines at %q, want at %q:\n%s", got, want, buf.String())
	}
	if !strings.Contains(lines[1], "3.33 instances/s, ETA 27s") {
		t.Errorf("no ETA in %q", lines[1])
	}
}

func TestFormats(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45000: "-45,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", 1500 * time.Millisecond: "2s", 65 * time.Second: "1m05s", 2*time.Hour + 3*time.Minute + 9*time.Second: "2h03m"} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%v) = %q, want %q", d, got, want)
		}
	}
	for r, want := range map[float64]string{0: "0.00 rows/s", 0.5: "30.0 rows/min", 2.5: "2.50 rows/s", 12.34: "12.3 rows/s", 12345.6: "12,346 rows/s"} {
		if got := rateText(r, "rows"); got != want {
			t.Errorf("rateText(%v) = %q, want %q", r, got, want)
		}
	}
	if got := bar(3, 4, 8); got != "[======  ]" {
		t.Errorf("bar: %q", got)
	}
	if got := bar(9, 4, 8); got != "[========]" {
		t.Errorf("bar over the total: %q", got)
	}
}

func TestBackfillRecords(t *testing.T) {
	now := time.Now()
	pending := store.Backfill{ID: 3, Schema: "public", Table: "t", Status: store.StatusPending}
	active := pending
	active.Status, active.RowsRead, active.RowsWritten, active.Chunks = store.StatusActive, 10, 5, 1
	completed := active
	completed.Status, completed.RowsRead = store.StatusCompleted, 30
	loaded := completed
	loaded.LoadedAt, loaded.RowsWritten, loaded.Chunks = &now, 30, 6
	failed := active
	failed.Status, failed.Error = store.StatusFailed, "no key"

	for _, c := range []struct {
		b     store.Backfill
		ended bool
	}{{pending, false}, {active, false}, {completed, false}, {loaded, true}, {failed, true}} {
		if backfillEnded(c.b) != c.ended {
			t.Errorf("backfillEnded(%s, loaded %v) = %v", c.b.Status, c.b.LoadedAt != nil, !c.ended)
		}
	}
	for _, c := range []struct {
		b, cur store.Backfill
		stale  bool
	}{
		{active, pending, false}, {pending, active, true}, {completed, active, false}, {active, completed, true},
		{loaded, completed, false}, {completed, loaded, true}, {active, active, false},
	} {
		if staler(c.b, c.cur) != c.stale {
			t.Errorf("staler(%s %d, %s %d) = %v", c.b.Status, c.b.RowsRead, c.cur.Status, c.cur.RowsRead, !c.stale)
		}
	}
	older := active
	older.RowsRead = 5
	if !staler(older, active) {
		t.Error("a record with fewer rows read is not stale")
	}

	it := backfillItem(completed)
	if it.Status != "completed, loading" || it.Ended || it.Label != "backfill 3 of public.t" || it.Done != completed.RowsRead || it.Total != 0 {
		t.Errorf("completed, not loaded: %+v", it)
	}
	// The bar's total is the source's row estimate, or the rows read when
	// the table grew past it.
	for _, c := range []struct{ estimate, total int64 }{{100, 100}, {completed.RowsRead - 1, completed.RowsRead}} {
		withEstimate := completed
		withEstimate.RowsEstimate = c.estimate
		if it := backfillItem(withEstimate); it.Total != c.total {
			t.Errorf("estimate %d: total %d, want %d", c.estimate, it.Total, c.total)
		}
	}
	if it := backfillItem(failed); it.Status != "failed: no key" || !it.Ended {
		t.Errorf("failed: %+v", it)
	}
}

func TestGroupItems(t *testing.T) {
	states := map[int64]string{1: "succeeded", 2: "running", 3: "waiting", 4: "failed", 5: "dry_run", 6: "blocked", 99: "running"}
	groups := map[int64]int{1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3}
	sizes := map[int]int64{1: 3, 2: 2, 3: 1}
	items := groupItems(states, groups, sizes)
	if len(items) != 3 {
		t.Fatalf("items: %+v", items)
	}
	for i, want := range []struct {
		label, status string
		done, total   int64
		detail        string
	}{
		{"group 1", "running", 1, 3, "1 running|0 failed"},
		{"group 2", "done", 2, 2, "0 running|1 failed"},
		{"group 3", "blocked", 0, 1, "0 running|0 failed|1 blocked"},
	} {
		it := items[i]
		if it.Label != want.label || it.Status != want.status || it.Done != want.done || it.Total != want.total || strings.Join(it.Detail, "|") != want.detail {
			t.Errorf("item %d: %+v, want %+v", i, it, want)
		}
	}
}

// A group whose failure halted its later dates says so, without a rate or
// an ETA: nothing will run there until someone acts.
func TestGroupItemsHalted(t *testing.T) {
	states := map[int64]string{1: "succeeded", 2: "failed", 3: "waiting", 4: "waiting", 5: "stopped", 6: "waiting", 7: "running"}
	groups := map[int64]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2, 7: 2}
	sizes := map[int]int64{1: 4, 2: 3}
	items := groupItems(states, groups, sizes)
	if it := items[0]; it.Status != "halted: 2 held" || !it.Ended {
		t.Errorf("group 1 (a failure, nothing running): %+v, want halted and no ETA", it)
	}
	if it := items[1]; it.Status != "running" || it.Ended {
		t.Errorf("group 2 (a stop, one still running): %+v, want running", it)
	}
	// On a terminal: the failure ended an instance 5 s after the first
	// snapshot, which makes a rate; the halted group still shows no ETA.
	p, buf, clk := testProgress(true)
	states[2] = "running"
	p.update(groupItems(states, groups, sizes))
	clk.advance(5 * time.Second)
	states[2] = "failed"
	buf.Reset()
	p.final(groupItems(states, groups, sizes))
	line := strings.Split(buf.String(), "\n")[0]
	if !strings.Contains(line, "halted: 2 held") || strings.Contains(line, "ETA") || strings.Contains(line, "/min") {
		t.Errorf("a halted group's bar: %q, want halted without rate or ETA", line)
	}
}

// The follower's first line is the backfill's: its status is the state the
// last event said, up to the end state.
func TestBatchFollowerHeader(t *testing.T) {
	f := &batchFollower{g: &globals{}, id: 7, state: store.BatchWaiting,
		states: map[int64]string{1: "succeeded", 2: "failed", 3: "waiting"}, groups: map[int64]int{1: 1, 2: 1, 3: 2}, sizes: map[int]int64{1: 2, 2: 1}}
	if head := f.bars()[0]; head.Label != "batch backfill 7" || head.Status != store.BatchWaiting || head.Done != 2 || head.Total != 3 || head.Ended {
		t.Errorf("header at the start: %+v", head)
	}
	done, err := f.handle(context.Background(), engine.Event{Kind: engine.KindBatchBackfill, BackfillID: 7, State: store.BatchRunning})
	if head := f.bars()[0]; done || err != nil || head.Status != store.BatchRunning {
		t.Errorf("header after the running event: %+v (%v %v)", head, done, err)
	}
	f.state = store.BatchFailed // as finish sets it
	if head := f.bars()[0]; head.Status != store.BatchFailed || !head.Ended {
		t.Errorf("header at the end: %+v", head)
	}
}
