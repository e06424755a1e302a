package check

import (
	"strings"
	"testing"
	"time"
)

func TestClockCheck(t *testing.T) {
	t.Parallel()
	local := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		server time.Time
		want   Status
		detail string
	}{
		{local, OK, "0s ahead of"},
		{local.Add(1500 * time.Millisecond), OK, "1.5s ahead of"},
		{local.Add(-2 * time.Second), OK, "2s behind"},
		{local.Add(2001 * time.Millisecond), Warn, "2.001s ahead of"},
		{local.Add(-time.Minute), Warn, "1m0s behind"},
	} {
		c := Clock("clock", tc.server, local, 3*time.Millisecond)
		if c.Status != tc.want || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Detail, "round trip 3ms") {
			t.Errorf("server at %s: %+v, want %s with %q", tc.server.Sub(local), c, tc.want, tc.detail)
		}
		if (c.Status == Warn) != strings.Contains(c.Fix, "NTP") {
			t.Errorf("server at %s: fix %q", tc.server.Sub(local), c.Fix)
		}
	}
}
