package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestDemoSaysWhereItsFilesAre: the demo runs end to end, says where its
// files are and explains the CONFLICTS column; with --keep the files are
// there after it ends, without it the line says they go and how to keep
// them.
func TestDemoSaysWhereItsFilesAre(t *testing.T) {
	t.Parallel()
	r := expect(t, 0, []string{"CONFLICTS: rows the writer changed while their chunk was read", "done: the destination equals the source"},
		"demo", "--rows", "300", "--keep")
	m := regexp.MustCompile(`files in (\S+) \(replica\.db: the destination, meta\.db: tidemark's metadata\); --keep keeps them`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("demo --keep does not say where its files are: %s", r)
	}
	t.Cleanup(func() { os.RemoveAll(m[1]) })
	for _, f := range []string{"replica.db", "meta.db"} {
		if _, err := os.Stat(filepath.Join(m[1], f)); err != nil {
			t.Errorf("demo --keep: %v", err)
		}
	}
}
