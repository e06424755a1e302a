package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

func init() { sinktest.RegisterMemory() }

// TestRunRefusesVerifyTheDestinationCannotDo: a configuration asking a
// destination that cannot be read back (the test-only memory type) to
// verify its backfills is a usage error, exit 2, naming the type; run and
// doctor refuse it before connecting to anything.
func TestRunRefusesVerifyTheDestinationCannotDo(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tidemark.yaml")
	yaml := `metadata: "sqlite://` + filepath.Join(dir, "meta.db") + `"
streams:
  - name: s
    source: {dsn: "postgres://tidemark@127.0.0.1:1/shop"}
    destination: {type: memory}
    include: [public.*]
    backfill: {verify: true}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "streams[0].backfill.verify: a memory destination cannot be read back, so a backfill cannot end with a verify: remove it, or set it to false"
	for _, verb := range []string{"doctor", "run"} {
		// A bound, not a wait: a run that accepted the configuration
		// would otherwise retry its unreachable source until stopped.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		var stdout, stderr bytes.Buffer
		code := Execute(ctx, func() {}, []string{verb, "-c", cfg}, &stdout, &stderr)
		cancel()
		if code != ExitUsage || !strings.Contains(stderr.String(), want) {
			t.Errorf("tidemark %s: exit %d, stderr %q; want exit %d saying %q", verb, code, stderr.String(), ExitUsage, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.db")); err == nil {
		t.Error("run created the metadata store of a configuration it refused")
	}
}

// TestFilesDestinationConfig: the files destination's own keys are
// checked through the CLI, every problem at once, exit 2: an unknown
// format, a size out of range and a dsn it does not read; a backfill
// verify is accepted (the files are read back by replay).
func TestFilesDestinationConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tidemark.yaml")
	yaml := `metadata: "sqlite://` + filepath.Join(dir, "meta.db") + `"
streams:
  - name: s
    source: {dsn: "postgres://tidemark@127.0.0.1:1/shop"}
    destination: {type: files, path: "` + filepath.Join(dir, "out") + `", format: csv, max_file_bytes: 10, dsn: "postgres://x@127.0.0.1/y"}
    include: [public.*]
    backfill: {verify: true}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Execute(t.Context(), func() {}, []string{"doctor", "-c", cfg}, &stdout, &stderr)
	for _, want := range []string{
		`streams[0].destination.format: "csv" is not a format the files destination writes: use jsonl (the default) or parquet`,
		"streams[0].destination.max_file_bytes: 10 is out of range: give a size from 65536 (64 KiB) to 4294967296 (4 GiB)",
		"streams[0].destination.dsn: only postgres destinations have a dsn: remove it, or use path, format or max_file_bytes",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "backfill.verify") {
		t.Errorf("a files destination's backfill.verify refused:\n%s", stderr.String())
	}
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
}
