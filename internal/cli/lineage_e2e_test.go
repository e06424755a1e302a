package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/store"
)

// TestTaskReads: what a task reads is checked against the stream's source
// when the daemon starts, each problem with its fix, and `tidemark tasks`
// shows it; `tidemark backfill dates` shows the dates a backfill of what it
// reads changed, and its cycles that hold them, the read's time zone
// deciding the day (docs/lineage.md).
func TestTaskReads(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE orders (id int PRIMARY KEY, created_at timestamptz, note text);
		CREATE TABLE nk (id int, d date);
		INSERT INTO orders VALUES (1, '2026-03-01 17:00:27+00', 'a'), (2, '2026-03-02 01:00:00+00', 'b'),
			(3, '2026-03-05 12:30:00+00', 'c'), (4, NULL, 'd')`)
	cfg, _, addr := sqliteConfig(t, fmt.Sprintf(`{dsn: "%s", status_interval: 1s}`, dsn), "{mode: manual}")
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withReads := func(reads string) {
		t.Helper()
		tasks := fmt.Sprintf("tasks:\n  - {name: daily_orders, project: sales, type: noop, schedule: daily, timezone: UTC, reads: %s}\n", reads)
		if err := os.WriteFile(cfg, append(append([]byte{}, base...), tasks...), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct{ reads, want string }{
		{`[{stream: s, object: public.orders, date_column: note}]`,
			`tasks[0].reads[0]: column "note" of public.orders is text, which places no row on a date: name a date, timestamp or timestamptz column as date_column`},
		{`[{stream: s, object: public.orders, date_column: created}]`,
			`tasks[0].reads[0]: public.orders has no column "created": set date_column to one of id, created_at, note`},
		{`[{stream: s, object: public.order, date_column: created_at}]`,
			`tasks[0].reads[0]: stream s's source has no table public.order: create it, or correct object`},
		{`[{stream: s, object: public.nk, date_column: d}]`,
			`tasks[0].reads[0]: stream s cannot replicate public.nk`},
	} {
		withReads(c.reads)
		expect(t, 1, []string{c.want}, "run", "-c", cfg)
	}

	withReads(`[{stream: s, object: public.orders, date_column: created_at, timezone: Asia/Shanghai}]`)
	d := startDaemon(t, cfg, filepath.Join(filepath.Dir(cfg), "daemon.log"))
	poll(t, d, "the API", func() bool { return tidemark(t, append(addr, "tasks")...).code == 0 })
	poll(t, d, "stream s running", func() bool { return theStream(t, addr).State == store.StateRunning })
	expect(t, 0, []string{"READS", "s:public.orders(created_at)"}, append(addr, "tasks")...)
	r := expect(t, 0, nil, append(addr, "tasks", "--json")...)
	var tasks []api.TaskView
	if err := json.Unmarshal([]byte(r.stdout), &tasks); err != nil {
		t.Fatal(err)
	}
	want := api.ReadView{Stream: "s", Object: "public.orders", DateColumn: "created_at", Timezone: "Asia/Shanghai"}
	if len(tasks) != 1 || len(tasks[0].Reads) != 1 || tasks[0].Reads[0] != want {
		t.Fatalf("tasks --json: %+v, want one task reading %+v", tasks, want)
	}

	r = expect(t, 0, []string{"backfill 1 of public.orders"}, append(addr, "backfill", "initiate", "s", "public.orders", "--wait")...)
	expect(t, 0, []string{"backfill 1 of public.orders changed rows of:", "created_at  3", "2026-03-01 17:00:00+00, 2026-03-02 01:00:00+00, 2026-03-05 12:30:00+00",
		"sales.daily_orders", "2026-03-02, 2026-03-05"}, append(addr, "backfill", "dates", "1")...)
	r = expect(t, 0, nil, append(addr, "backfill", "dates", "1", "--json")...)
	var dates api.ChangedDatesView
	if err := json.Unmarshal([]byte(r.stdout), &dates); err != nil {
		t.Fatal(err)
	}
	if len(dates.Tasks) != 1 || strings.Join(dates.Tasks[0].Instances, " ") != "2026-03-02 2026-03-05" {
		t.Errorf("backfill dates --json: %+v, want the task's cycles of 2026-03-02 and 2026-03-05", dates)
	}
	expect(t, 2, []string{`ID "x": give a backfill's id`}, append(addr, "backfill", "dates", "x")...)
	expect(t, 2, []string{"no backfill 99"}, append(addr, "backfill", "dates", "99")...)
}
