package config

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

const minimalYAML = `
streams:
  - name: shop
    source:
      dsn: postgres://tidemark:secret@db/shop
    destination:
      type: sqlite
      path: replica.db
    include: [public.*]
`

// envOf returns an environment holding vars.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func mustParse(t *testing.T, yaml string, env map[string]string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(yaml), envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func TestDefaults(t *testing.T) {
	cfg := mustParse(t, minimalYAML, nil)
	s := &cfg.Streams[0]
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"metadata", cfg.Metadata, "sqlite://tidemark.db"},
		{"api.listen", cfg.API.Listen, "127.0.0.1:7420"},
		{"api.tokens", len(cfg.API.Tokens), 0},
		{"log.level", cfg.Log.Level, "info"},
		{"log.format", cfg.Log.Format, "auto"},
		{"source.type", s.Source.Type, "postgres"},
		{"source.publication", s.Source.Publication, "tidemark_shop"},
		{"source.slot", s.Source.Slot, "tidemark_shop"},
		{"source.status_interval", s.Source.StatusInterval, 10 * time.Second},
		{"source.wal_warn_bytes", s.Source.WALWarnBytes, int64(1 << 30)},
		{"source.read_timeouts.statement", s.Source.ReadTimeouts.Statement, 5 * time.Minute},
		{"source.read_timeouts.lock", s.Source.ReadTimeouts.Lock, 10 * time.Second},
		{"source.read_timeouts.idle_in_transaction", s.Source.ReadTimeouts.IdleInTransaction, time.Minute},
		{"destination.dsn", s.Destination.DSN, ""},
		{"exclude", len(s.Exclude), 0},
		{"include_future_tables", s.IncludeFutureTables, true},
		{"keys", len(s.Keys), 0},
		{"backfill.mode", s.Backfill.Mode, "automatic"},
		{"backfill.exclude", len(s.Backfill.Exclude), 0},
		{"backfill.max_concurrent", s.Backfill.MaxConcurrent, 2},
		{"backfill.chunk_size", s.Backfill.ChunkSize, 10000},
		{"backfill.rows_per_second", s.Backfill.RowsPerSecond, 0},
		{"backfill.window_max_changes", s.Backfill.WindowMaxChanges, 100000},
		{"backfill.verify", s.Backfill.Verify, true},
		{"backfill.chunk_write_target", s.Backfill.ChunkWriteTarget, 20 * time.Millisecond},
		{"backfill.snapshot_max_hold", s.Backfill.SnapshotMaxHold, time.Hour},
		{"batch.max_changes", s.Batch.MaxChanges, 10000},
		{"batch.max_delay", s.Batch.MaxDelay, 200 * time.Millisecond},
		{"retry.initial", s.Retry.Initial, time.Second},
		{"retry.max", s.Retry.Max, time.Minute},
		{"lag_warn", s.LagWarn, 5 * time.Minute},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}
}

// TestEmptyMeansDefault checks that an empty value, as ${VAR:-} gives, is
// the default.
func TestEmptyMeansDefault(t *testing.T) {
	cfg := mustParse(t, `
metadata: ""
api: {listen: "${UNSET:-}"}
log: {level: "", format: ~}
streams:
  - name: shop
    source: {dsn: "postgres://db/shop", slot: "", status_interval: "", wal_warn_bytes: ""}
    destination: {type: sqlite, path: replica.db}
    include: [public.*]
    include_future_tables: ""
    backfill: {mode: "", chunk_size: ""}
    retry: {initial: "${UNSET:-}"}
`, nil)
	want := mustParse(t, `
streams:
  - name: shop
    source: {dsn: "postgres://db/shop"}
    destination: {type: sqlite, path: replica.db}
    include: [public.*]
`, nil)
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
}

func TestFullConfig(t *testing.T) {
	cfg := mustParse(t, `
metadata: postgres://meta@db/tidemark
api:
  listen: 0.0.0.0:8080
  allowed_hosts: [tidemark.example.com, 10.0.0.0/8, 192.168.1.5, "::1"]
  tokens:
    - {name: ci, token: "${CI_TOKEN}", role: operator}
    - {name: ops, token: literal-token, role: admin}
log: {level: debug, format: json}
streams:
  - name: shop
    source:
      type: postgres
      dsn: postgres://tidemark:${PGPASSWORD}@db/shop
      publication: shop_pub
      slot: shop_slot
      status_interval: 5s
      wal_warn_bytes: 2_000_000
      read_timeouts: {statement: 100ms, lock: 1h, idle_in_transaction: 24h}
    destination: {type: postgres, dsn: "postgres://replica/shop"}
    include: ["public.*", '"Sales".*']
    exclude: ["public.tmp_*"]
    include_future_tables: false
    keys:
      public.events: [tenant_id, id]
      '"Sales"."Order Items"': [order_id, line]
    backfill:
      mode: manual
      exclude: [public.audit_log]
      max_concurrent: 4
      chunk_size: 500
      rows_per_second: 1000
      window_max_changes: 5000
      verify: false
      chunk_write_target: 50ms
      snapshot_max_hold: 30m
    batch: {max_changes: 100, max_delay: 1s}
    retry: {initial: 500ms, max: 30s}
    lag_warn: 90s
`, map[string]string{"CI_TOKEN": "ci-secret", "PGPASSWORD": "pw"})
	s := cfg.Streams[0]
	want := Stream{
		Name: "shop",
		Source: Source{Type: "postgres", DSN: "postgres://tidemark:pw@db/shop", Publication: "shop_pub",
			Slot: "shop_slot", StatusInterval: 5 * time.Second, WALWarnBytes: 2000000,
			ReadTimeouts: ReadTimeouts{Statement: 100 * time.Millisecond, Lock: time.Hour, IdleInTransaction: 24 * time.Hour}},
		Destination:         Destination{Type: "postgres", DSN: "postgres://replica/shop"},
		Include:             []Pattern{mustPattern(t, "public.*"), mustPattern(t, `"Sales".*`)},
		Exclude:             []Pattern{mustPattern(t, "public.tmp_*")},
		IncludeFutureTables: false,
		Keys: map[change.TableID][]string{
			{Schema: "public", Name: "events"}:     {"tenant_id", "id"},
			{Schema: "Sales", Name: "Order Items"}: {"order_id", "line"},
		},
		Backfill: Backfill{Mode: "manual", Exclude: []Pattern{mustPattern(t, "public.audit_log")},
			MaxConcurrent: 4, ChunkSize: 500, RowsPerSecond: 1000, WindowMaxChanges: 5000, ChunkWriteTarget: 50 * time.Millisecond,
			SnapshotMaxHold: 30 * time.Minute},
		Batch:             Batch{MaxChanges: 100, MaxDelay: time.Second},
		Retry:             Retry{Initial: 500 * time.Millisecond, Max: 30 * time.Second},
		LagWarn:           90 * time.Second,
		DiscoveryInterval: 10 * time.Second,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("stream\n got %+v\nwant %+v", s, want)
	}
	if cfg.Metadata != "postgres://meta@db/tidemark" || cfg.API.Listen != "0.0.0.0:8080" ||
		cfg.Log != (Log{Level: "debug", Format: "json"}) || cfg.Log.SlogLevel() != slog.LevelDebug {
		t.Errorf("top level: %+v", cfg)
	}
	wantTokens := []Token{{Name: "ci", Token: "ci-secret", Role: RoleOperator}, {Name: "ops", Token: "literal-token", Role: RoleAdmin}}
	if !reflect.DeepEqual(cfg.API.Tokens, wantTokens) {
		t.Errorf("tokens = %+v", cfg.API.Tokens)
	}
	if _, ok := cfg.MetadataSQLite(); ok {
		t.Error("postgres metadata reported as sqlite")
	}
}

func TestExpand(t *testing.T) {
	env := envOf(map[string]string{"A": "alpha", "B": "beta", "EMPTY": ""})
	for _, tc := range []struct {
		in, want string
		problem  string
	}{
		{"plain", "plain", ""},
		{"${A}", "alpha", ""},
		{"x${A}y${B}z", "xalphaybetaz", ""},
		{"${A}${B}", "alphabeta", ""},
		{"${UNSET:-def}", "def", ""},
		{"${A:-def}", "alpha", ""},
		{"${EMPTY:-def}", "def", ""},
		{"${EMPTY}", "", ""},
		{"${UNSET:-}", "", ""},
		{"${UNSET:-a:-b}", "a:-b", ""},
		{"$${A}", "${A}", ""},
		{"$$${A}", "$${A}", ""},
		{"$A and $ and a$b", "$A and $ and a$b", ""},
		{"pa$$word", "pa$$word", ""},
		{"${UNSET}", "", "environment variable UNSET is not set: set it, or give a default with ${UNSET:-default}"},
		{"${1A}", "", "malformed ${} reference: write ${NAME} or ${NAME:-default}, NAME being letters, digits and underscores, or $${ for a literal ${"},
		{"${}", "", "malformed ${} reference"},
		{"${A:?x}", "", "malformed ${} reference"},
		{"x${A", "x", "unterminated ${: close it with }, or write $${ for a literal ${"},
	} {
		got, problems := expand(tc.in, env)
		if tc.problem == "" {
			if problems != nil || got != tc.want {
				t.Errorf("expand(%q) = %q, %q; want %q", tc.in, got, problems, tc.want)
			}
			continue
		}
		if len(problems) != 1 || !strings.HasPrefix(problems[0], tc.problem) {
			t.Errorf("expand(%q) problems = %q, want %q", tc.in, problems, tc.problem)
		}
	}
}

func TestExpandInParse(t *testing.T) {
	cfg := mustParse(t, `
streams:
  - name: ${NAME:-shop}
    source: {dsn: "postgres://u:${PW}@db/shop"}
    destination: {type: sqlite, path: "${DATA:-/var/lib}/replica.db"}
    include: ["${SCHEMA}.*"]
    backfill:
      chunk_size: ${CHUNK}
      max_concurrent: ${CONC:-3}
    retry: {initial: "${INITIAL}"}
`, map[string]string{"PW": "pw", "SCHEMA": "app", "CHUNK": "250", "INITIAL": "2s"})
	s := cfg.Streams[0]
	if s.Name != "shop" || s.Source.DSN != "postgres://u:pw@db/shop" || s.Destination.Path != "/var/lib/replica.db" ||
		s.Include[0].String() != "app.*" || s.Backfill.ChunkSize != 250 || s.Backfill.MaxConcurrent != 3 ||
		s.Retry.Initial != 2*time.Second || s.Source.Slot != "tidemark_shop" {
		t.Errorf("stream = %+v", s)
	}

	// An unset variable is an error naming the key; the value is not shown.
	_, err := Parse([]byte(strings.Replace(minimalYAML, "secret", "${PGPASSWORD}", 1)), nil)
	wantProblems(t, err, Problem{"streams[0].source.dsn",
		"environment variable PGPASSWORD is not set: set it, or give a default with ${PGPASSWORD:-default}"})
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		EnvMetadata: "postgres://meta@db/tidemark",
		EnvListen:   ":9000",
		EnvAPIToken: "from-env-${NOT_EXPANDED}",
	}
	cfg := mustParse(t, `
metadata: sqlite://${UNSET_BUT_OVERRIDDEN}
api: {listen: "127.0.0.1:1", allowed_hosts: [tidemark.example.com], tokens: [{name: ci, token: t1, role: viewer}]}
`+minimalYAML[1:], env)
	if cfg.Metadata != env[EnvMetadata] || cfg.API.Listen != ":9000" {
		t.Errorf("metadata %q, listen %q", cfg.Metadata, cfg.API.Listen)
	}
	want := []Token{{Name: "ci", Token: "t1", Role: RoleViewer}, {Name: "env", Token: "from-env-${NOT_EXPANDED}", Role: DefaultEnvTokenRole}}
	if !reflect.DeepEqual(cfg.API.Tokens, want) {
		t.Errorf("tokens = %+v, want %+v", cfg.API.Tokens, want)
	}

	// Empty variables are unset.
	cfg = mustParse(t, minimalYAML, map[string]string{EnvMetadata: "", EnvListen: "", EnvAPIToken: ""})
	if cfg.Metadata != defaultMetadata || cfg.API.Listen != defaultListen || len(cfg.API.Tokens) != 0 {
		t.Errorf("empty overrides applied: %+v", cfg)
	}
	if path, ok := cfg.MetadataSQLite(); !ok || path != "tidemark.db" {
		t.Errorf("MetadataSQLite() = %q, %v", path, ok)
	}

	// Problems with overridden values name the variable.
	_, err := Parse([]byte(`api: {tokens: [{name: env, token: t1, role: viewer}]}`+minimalYAML), envOf(map[string]string{
		EnvMetadata: "mysql://root:secret@db", EnvListen: "nope", EnvAPIToken: "t2",
	}))
	wantProblems(t, err,
		Problem{EnvMetadata, "not a sqlite:// or postgres:// URL: use e.g. sqlite://tidemark.db or postgres://user:password@host:5432/dbname"},
		Problem{EnvListen, `"nope" is not a host:port address: use e.g. 127.0.0.1:7420`},
		Problem{EnvAPIToken, `"env" is used twice (also api.tokens[0]): token names must be unique (TIDEMARK_API_TOKEN adds a token named "env")`},
	)
}

// TIDEMARK_API_TOKEN_ROLE sets the role of TIDEMARK_API_TOKEN's token; a
// bad role, or a role without the token, names the variable.
func TestEnvTokenRole(t *testing.T) {
	cfg := mustParse(t, minimalYAML, map[string]string{EnvAPIToken: "t", EnvAPITokenRole: "viewer"})
	if want := []Token{{Name: EnvTokenName, Token: "t", Role: RoleViewer}}; !reflect.DeepEqual(cfg.API.Tokens, want) {
		t.Errorf("tokens = %+v, want %+v", cfg.API.Tokens, want)
	}
	_, err := Parse([]byte(minimalYAML), envOf(map[string]string{EnvAPIToken: "t", EnvAPITokenRole: "root"}))
	wantProblems(t, err, Problem{EnvAPITokenRole, `"root" is not a role: use viewer, operator or admin`})
	_, err = Parse([]byte(minimalYAML), envOf(map[string]string{EnvAPITokenRole: "viewer"}))
	wantProblems(t, err, Problem{EnvAPITokenRole, "set without TIDEMARK_API_TOKEN: set the token too, or unset TIDEMARK_API_TOKEN_ROLE"})
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(minimalYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvListen, "127.0.0.1:7777")
	cfg, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Listen != "127.0.0.1:7777" || cfg.Streams[0].Name != "shop" {
		t.Errorf("Load = %+v", cfg)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("log: {level: loud, format: xml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	ve, ok := errors.AsType[*ValidationError](err)
	if !ok || ve.File != bad {
		t.Fatalf("Load(bad) = %v", err)
	}
	want := bad + `: log.level: "loud" is not supported: use debug, info, warn or error` + "\n" +
		bad + `: log.format: "xml" is not supported: use auto, json or text` + "\n" +
		bad + ": streams: no streams and no tasks: add at least one stream or task"
	if err.Error() != want {
		t.Errorf("Load(bad) error:\n%s\nwant:\n%s", err, want)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestValidationErrorIsJoined(t *testing.T) {
	_, err := Parse([]byte("log: {level: loud}\n"), nil)
	ve, ok := errors.AsType[*ValidationError](err)
	if !ok {
		t.Fatalf("error %T is no *ValidationError", err)
	}
	if joined := errors.Join(ve.Unwrap()...); joined.Error() != err.Error() {
		t.Errorf("Error() = %q, errors.Join gives %q", err, joined)
	}
	var p Problem
	if !errors.As(err, &p) || p.Path != "log.level" {
		t.Errorf("errors.As Problem = %+v", p)
	}
	if (Problem{Message: "m"}).Error() != "m" {
		t.Error("a problem without a path prints a path")
	}
}

func TestStreamHelpers(t *testing.T) {
	cfg := mustParse(t, `
streams:
  - name: shop
    source: {dsn: "postgres://db/shop"}
    destination: {type: sqlite, path: replica.db}
    include: [public.*, '"my.schema".*']
    exclude: [public.tmp_*]
    backfill: {exclude: [public.audit_log]}
  - name: manual
    source: {dsn: "postgres://db/other"}
    destination: {type: sqlite, path: other.db}
    include: [public.*]
    backfill: {mode: manual}
`, nil)
	tab := func(schema, name string) change.TableID { return change.TableID{Schema: schema, Name: name} }
	shop, ok := cfg.Stream("shop")
	if !ok || shop != &cfg.Streams[0] {
		t.Fatalf("Stream(shop) = %v, %v", shop, ok)
	}
	manual, _ := cfg.Stream("manual")
	if _, ok := cfg.Stream("nope"); ok {
		t.Error("Stream(nope) found a stream")
	}
	for _, tc := range []struct {
		s                *Stream
		table            change.TableID
		includes, backfl bool
	}{
		{shop, tab("public", "orders"), true, true},
		{shop, tab("my.schema", "x"), true, true},
		{shop, tab("public", "tmp_1"), false, false},
		{shop, tab("public", "audit_log"), true, false},
		{shop, tab("app", "orders"), false, false},
		{manual, tab("public", "orders"), true, false},
	} {
		if got := tc.s.Includes(tc.table); got != tc.includes {
			t.Errorf("%s.Includes(%v) = %v", tc.s.Name, tc.table, got)
		}
		if got := tc.s.AutoBackfill(tc.table); got != tc.backfl {
			t.Errorf("%s.AutoBackfill(%v) = %v", tc.s.Name, tc.table, got)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	for level, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError, "": slog.LevelInfo,
	} {
		if got := (Log{Level: level}).SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v", level, got)
		}
	}
}

// wantProblems checks that err lists exactly the given problems, in order.
func wantProblems(t *testing.T, err error, want ...Problem) {
	t.Helper()
	ve, ok := errors.AsType[*ValidationError](err)
	if !ok {
		t.Fatalf("error %v (%T) is no *ValidationError", err, err)
	}
	if !reflect.DeepEqual(ve.Problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", ve, &ValidationError{Problems: want})
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	cfg := mustParse(t, `
streams:
  - &base
    name: one
    source: {dsn: "postgres://db/one"}
    destination: {type: sqlite, path: one.db}
    include: [public.*]
    backfill: {mode: manual, chunk_size: 77}
  - <<: *base
    name: two
    source: {dsn: "postgres://db/two"}
    destination: {type: sqlite, path: two.db}
`, nil)
	two, _ := cfg.Stream("two")
	if two.Backfill.ChunkSize != 77 || two.Backfill.Mode != "manual" || two.Source.Slot != "tidemark_two" ||
		len(two.Include) != 1 || two.Destination.Path != "two.db" {
		t.Errorf("merged stream = %+v", two)
	}
}
