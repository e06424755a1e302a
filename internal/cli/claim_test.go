package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidemark/tidemark/internal/store"
)

// TestRunRefusesClaimedStore: `tidemark run` on a metadata store another
// daemon holds (here this test process) exits 1 naming the holder and what
// to do, and starts nothing.
func TestRunRefusesClaimedStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	meta := "sqlite://" + filepath.Join(dir, "meta.db")
	cfg := filepath.Join(dir, "tidemark.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
metadata: "%s"
api: {listen: "127.0.0.1:%d"}
tasks:
  - {name: idle, project: p, type: noop, schedule: daily}
`, meta, freePort(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), meta)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	claim, err := st.Claim(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Release()
	host, _ := os.Hostname()
	expect(t, 1, []string{"is in use by another tidemark daemon", "host " + host, fmt.Sprintf("pid %d,", os.Getpid()),
		"running since", "stop that one first"}, "run", "-c", cfg)
}
