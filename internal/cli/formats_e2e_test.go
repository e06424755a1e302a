package cli_test

import (
	"regexp"
	"strings"
	"testing"
)

// Tables show numbers with thousands separators and times in the local
// zone with its offset; --json keeps the numbers raw and the times in UTC
// RFC 3339.
func TestHumanFormats(t *testing.T) {
	t.Parallel()
	_, dsn := shopSource(t, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 1234)`)
	d, _, addr := sqliteDaemon(t, dsn, "{mode: manual}")
	kolkata := []string{"TZ=Asia/Kolkata"} // +05:30, all year
	cli := func(args ...string) result { t.Helper(); return tidemarkEnv(t, kolkata, append(args, addr...)...) }
	poll(t, d, "the object", func() bool { return strings.Contains(cli("objects", "s").stdout, "public.t") })
	if r := cli("backfill", "initiate", "s", "public.t", "--wait"); r.code != 0 {
		t.Fatalf("initiate: %s", r)
	}
	local := regexp.MustCompile(`\b20\d\d-\d\d-\d\d \d\d:\d\d:\d\d \+05:30\b`)
	for _, args := range [][]string{{"backfill", "list", "--stream", "s"}, {"audit", "--stream", "s"}, {"verify", "s"}} {
		r := cli(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "1,234") || strings.Contains(r.stdout, "1234") {
			t.Errorf("%s: %s, want 1,234 and never 1234", strings.Join(args, " "), r)
		}
		if args[0] != "verify" && !local.MatchString(r.stdout) {
			t.Errorf("%s: %s, want times in +05:30", strings.Join(args, " "), r)
		}
	}
	utc := regexp.MustCompile(`"created_at": "20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"`)
	for _, args := range [][]string{{"backfill", "list", "--stream", "s", "--json"}, {"audit", "--stream", "s", "--json"}} {
		r := cli(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "1234") || strings.Contains(r.stdout, "1,234") || !utc.MatchString(r.stdout) {
			t.Errorf("%s: %s, want 1234 raw and created_at in UTC", strings.Join(args, " "), r)
		}
	}
}
