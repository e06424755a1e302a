package cli

import (
	"strings"
	"testing"
)

// Without --keep the demo says its files go when it ends, and how to keep
// them.
func TestDemoFilesLine(t *testing.T) {
	if line := demoFilesLine("/tmp/x", false); !strings.Contains(line, "/tmp/x") ||
		!strings.Contains(line, "removed when the demo ends (run with --keep to keep them)") {
		t.Errorf("without --keep: %q", line)
	}
}
