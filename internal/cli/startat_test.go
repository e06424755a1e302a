package cli

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBatchStartAt: a batch backfill's start time is --start-at; --run-at,
// its old name, still works and must agree with it when both are given.
func TestBatchStartAt(t *testing.T) {
	const at = "2030-01-02T03:04:00+08:00"
	want, _ := time.Parse(time.RFC3339, at)
	for _, f := range []requestFlags{{startAt: at}, {runAt: at}, {startAt: at, runAt: at}} {
		f.groups, f.from = 1, "2025-01-01"
		r, err := f.request("t")
		if err != nil || r.StartAt == nil || !r.StartAt.Equal(want) {
			t.Errorf("--start-at %q --run-at %q: start %v, %v; want %s", f.startAt, f.runAt, r.StartAt, err, at)
		}
	}
	f := requestFlags{groups: 1, from: "2025-01-01", startAt: at, runAt: "2030-01-02T03:05:00+08:00"}
	_, err := f.request("t")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(err.Error(), "differ") {
		t.Errorf("--start-at and --run-at differing: %v, want a usage error saying they differ", err)
	}
	f = requestFlags{groups: 1, from: "2025-01-01", runAt: "tomorrow"}
	if _, err := f.request("t"); err == nil || !strings.Contains(err.Error(), `--run-at "tomorrow"`) {
		t.Errorf("--run-at tomorrow: %v, want the flag given named", err)
	}
}
