package sink_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/sink"
	_ "github.com/tidemark/tidemark/internal/sink/all"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
	_ "github.com/tidemark/tidemark/internal/source/all"
)

func init() { sinktest.RegisterMemory() }

// TestCapabilitiesByType: the SQL destinations have every capability, the
// memory destination (core only) none, each read by type assertion from
// the registered type.
func TestCapabilitiesByType(t *testing.T) {
	all := []sink.Capability{sink.CreateTables, sink.ReplaceRanges, sink.ReadBack, sink.AlterTables}
	for _, c := range []struct {
		typ  string
		want []sink.Capability
	}{{config.TypePostgres, all}, {config.TypeSQLite, all}, {sinktest.MemoryType, nil}} {
		typ, err := sink.Lookup(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		if got := sink.Capabilities(typ.Example); !slices.Equal(got, c.want) {
			t.Errorf("%s: capabilities %v, want %v", c.typ, got, c.want)
		}
		for _, capability := range all {
			if msg := sink.Refusal(c.typ, capability, "x", "y"); (msg == "") != slices.Contains(c.want, capability) {
				t.Errorf("%s: refusal for %q is %q", c.typ, capability, msg)
			}
		}
	}
	if _, err := sink.Lookup("bigquery"); err == nil || !strings.Contains(err.Error(), `destination type "bigquery" is not supported`) {
		t.Errorf("lookup of an unregistered type: %v", err)
	}
}

// TestConfigRefusesVerifyWithoutReadBack: a destination that cannot be
// read back does not verify its backfills by default, and asking it to is
// a configuration problem naming the destination's type; a key only
// another type reads is refused as for the SQL destinations.
func TestConfigRefusesVerifyWithoutReadBack(t *testing.T) {
	parse := func(dest, backfill string) (*config.Config, []config.Problem) {
		t.Helper()
		cfg, err := config.Parse(fmt.Appendf(nil, `
streams:
  - name: s
    source: {dsn: "postgres://db/x"}
    destination: %s
    include: [public.*]
    backfill: %s
`, dest, backfill), func(string) (string, bool) { return "", false })
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			return cfg, ve.Problems
		}
		if err != nil {
			t.Fatal(err)
		}
		return cfg, nil
	}
	cfg, problems := parse("{type: memory}", "{mode: manual}")
	if len(problems) > 0 || cfg.Streams[0].Backfill.Verify {
		t.Fatalf("memory destination without verify: problems %v, verify %v; want none and off", problems, cfg.Streams[0].Backfill.Verify)
	}
	_, problems = parse("{type: memory}", "{verify: true}")
	want := []config.Problem{{Path: "streams[0].backfill.verify",
		Message: "a memory destination cannot be read back, so a backfill cannot end with a verify: remove it, or set it to false"}}
	if !slices.Equal(problems, want) {
		t.Errorf("verify on a memory destination: %v, want %v", problems, want)
	}
	_, problems = parse("{type: memory, dsn: 'postgres://db/y'}", "{verify: false}")
	want = []config.Problem{{Path: "streams[0].destination.dsn", Message: "only postgres destinations have a dsn: remove it"}}
	if !slices.Equal(problems, want) {
		t.Errorf("dsn on a memory destination: %v, want %v", problems, want)
	}
	cfg, problems = parse("{type: sqlite, path: x.db}", "{mode: manual}")
	if len(problems) > 0 || !cfg.Streams[0].Backfill.Verify {
		t.Errorf("sqlite destination: problems %v, verify %v; want none and on", problems, cfg.Streams[0].Backfill.Verify)
	}
}
