package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// TestSIGKILLWithShellTasksRunning kills the daemon while shell tasks of a
// backfill run, three times. Each task holds an flock for its date that
// its child process inherits, and fails at once if the lock is taken, so a
// process group the restart failed to end, or two runs of one task date at
// once, fail the backfill. The killed daemon's process groups must be gone
// after each restart, and the backfill must finish with every date run to
// its end.
func TestSIGKILLWithShellTasksRunning(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	cmd := lockedShellCommand(dir, journal)
	cfgPath := filepath.Join(dir, "tidemark.yaml")
	metaPath := filepath.Join(dir, "meta.db")
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "%s"}
resource_groups: [{name: default, concurrency: 3}]
tasks:
  - {name: load, project: p, type: shell, schedule: daily, command: %s}
  - {name: report, project: p, type: shell, schedule: daily, depends_on: [load], command: "echo report ${bizdate}"}
`, metaPath, addr, strconv.Quote(cmd))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, addr: addr}
	c.start()
	st, err := store.Open(ctx, "sqlite://"+metaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	c.waitAPI()
	id := submitBatch(t, addr, `{"task": "load", "dates": {"from": "2025-01-01", "to": "2025-01-30"}, "scope": {"mode": "list", "downstream": 1}, "groups": 3}`)
	for kill := 1; kill <= 3; kill++ {
		var groups []int
		c.waitFor(fmt.Sprintf("shell tasks running before kill %d", kill), func() bool {
			groups = runningGroups(t, st, id)
			rec, err := st.GetBatchBackfill(ctx, id)
			if err == nil && rec.State != store.BatchRunning && rec.State != store.BatchWaiting {
				ins, _ := st.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: id})
				for _, in := range ins {
					t.Logf("%d %s %s %s attempt %d: %s %s", in.ID, in.Task, in.BizTime.Format("01-02"), in.State, in.Attempt, in.Reason, in.Error)
				}
				t.Fatalf("the backfill ended (%s: %s) before kill %d", rec.State, rec.Error, kill)
			}
			return len(groups) > 0 && err == nil && rec.States[store.InstanceSucceeded] >= 10*(kill-1)
		})
		c.kill()
		alive := 0
		for _, g := range groups {
			if syscall.Kill(-g, 0) == nil {
				alive++
			}
		}
		t.Logf("kill %d: %d instance(s) running, %d process group(s) outlived the daemon", kill, len(groups), alive)
		c.start()
		c.waitFor("the killed daemon's process groups to be ended", func() bool {
			for _, g := range groups {
				if syscall.Kill(-g, 0) == nil {
					return false
				}
			}
			return true
		})
	}
	var rec store.BatchBackfill
	c.waitFor("backfill to end", func() bool {
		rec, err = st.GetBatchBackfill(ctx, id)
		return err == nil && rec.State != store.BatchRunning && rec.State != store.BatchWaiting
	})
	if rec.State != store.BatchSucceeded || rec.States[store.InstanceSucceeded] != 60 {
		t.Fatalf("backfill = %s %v (%s), want 60 succeeded instances", rec.State, rec.States, rec.Error)
	}
	checkJournal(t, journal, 30)
}

// lockedShellCommand is a shell task that holds a lock on its business
// date in dir while it runs, and notes its start and end in journal. The
// child `sleep` keeps the lock's descriptor: if the group survived a
// crash, the next attempt finds the lock taken and exits 99.
func lockedShellCommand(dir, journal string) string {
	return fmt.Sprintf(`exec 9>"%[1]s/lock-$TIDEMARK_BIZDATE"; flock -n 9 || { echo "date $TIDEMARK_BIZDATE is locked: an earlier run still lives" >&2; exit 99; }; `+
		`echo "start $TIDEMARK_BIZDATE $TIDEMARK_ATTEMPT" >> "%[2]s"; sleep 0.4; echo "end $TIDEMARK_BIZDATE" >> "%[2]s"`, dir, journal)
}

// checkJournal checks that each of the first days of January 2025 ran to
// its end.
func checkJournal(t *testing.T, journal string, days int) {
	t.Helper()
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if d, ok := strings.CutPrefix(line, "end "); ok {
			ends[d]++
		}
	}
	for d := 1; d <= days; d++ {
		if day := fmt.Sprintf("202501%02d", d); ends[day] < 1 {
			t.Errorf("date %s never ran to its end; journal:\n%s", day, data)
		}
	}
}

// waitAPI waits until the daemon answers.
func (c *crashEnv) waitAPI() {
	c.t.Helper()
	c.waitFor("the API", func() bool {
		resp, err := http.Get("http://" + c.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

// submitBatch submits a backfill through the API and returns its id.
func submitBatch(t *testing.T, addr, body string) int64 {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/api/v1/batch/backfills", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Backfill store.BatchBackfill `json:"backfill"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: HTTP %d, %v", resp.StatusCode, err)
	}
	return out.Backfill.ID
}

// runningGroups are the process groups recorded for running instances.
func runningGroups(t *testing.T, st *store.Store, id int64) []int {
	ins, err := st.ListBatchInstances(context.Background(), store.BatchInstanceFilter{BackfillID: id, States: []string{store.InstanceRunning}})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, in := range ins {
		if in.PGID != 0 {
			out = append(out, in.PGID)
		}
	}
	return out
}
