package engine

import (
	"math"
	"regexp"
	"testing"
)

// TestRunTagUniquePerDaemon: two daemons' attempt 1 of instance 1 (each
// metadata store numbers its instances from 1) get different tags, so a
// restarted daemon ending its own attempt's processes by tag leaves the
// other daemon's alone; every tag fits PostgreSQL's application_name.
func TestRunTagUniquePerDaemon(t *testing.T) {
	a, b := runTag(1, 1), runTag(1, 1)
	if a == b {
		t.Fatalf("two attempts 1 of instance 1 share the tag %q", a)
	}
	form := regexp.MustCompile(`^tidemark-i1-a1-[0-9a-f]{12}$`)
	if !form.MatchString(a) || !form.MatchString(b) {
		t.Errorf("tags %q, %q, want tidemark-i1-a1- and 12 hex digits", a, b)
	}
	if long := runTag(math.MaxInt64, math.MaxInt32); len(long) > 63 {
		t.Errorf("tag %q is %d bytes, over PostgreSQL's 63", long, len(long))
	}
}
