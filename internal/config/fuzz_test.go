package config

import (
	"errors"
	"slices"
	"testing"
)

var fuzzSeeds = []string{
	"",
	"streams: []",
	minimalYAML,
	`
metadata: postgres://meta@db/tidemark
api:
  listen: 0.0.0.0:8080
  allowed_hosts: [tidemark.example.com]
  tokens:
    - {name: ci, token: "${CI_TOKEN}", role: operator}
log: {level: debug, format: json}
streams:
  - &base
    name: shop
    source:
      dsn: postgres://tidemark:${PGPASSWORD:-pw}@db/shop
      publication: shop_pub
      status_interval: 5s
      wal_warn_bytes: 2_000_000
    destination: {type: postgres, dsn: "postgres://replica/shop"}
    include: ["public.*", '"Sales".*']
    exclude: ["public.tmp_*"]
    include_future_tables: false
    keys:
      public.events: [tenant_id, id]
      '"Sales"."Order Items"': [order_id, line]
    backfill: {mode: manual, exclude: [public.audit_log], max_concurrent: 4, chunk_size: 500}
    batch: {max_changes: 100, max_delay: 1s}
    retry: {initial: 500ms, max: 30s}
    lag_warn: 2m
  - <<: *base
    name: shop2
    source: {dsn: "postgres://db/other"}
`,
	streams(nil, kv{"name": "Bad", "backfill": "{chunk_size: 0}"}),
	"streams:\n  - x\n  -\n  - name: a\n    name: b\n",
	"streams: [{name: a, keys: {a.b.c: [id], public.x: x}, include: [[a]]}]",
	"api: [a]\nstreams: {a: b}\n",
	"streams: [\n",
	"- a\n",
	"a: &a [*a]\n",
	minimalYAML + "---\nlog: {}\n",
	"metadata: ${UNSET}\nstreams:\n  - name: ${NAME:-x}\n    include: [\"${X\"]\n",
	minimalTaskYAML,
	`
batch: {timezone: Europe/Paris, output_lookback_days: 30, confirm_above: 500, log_limit_bytes: 65_536}
resource_groups:
  - {name: default, concurrency: 8}
  - {name: heavy, concurrency: "${HEAVY:-2}"}
connections:
  - {name: warehouse, type: postgres, dsn: "postgres://u:${PGPASSWORD}@db/wh"}
  - {name: local, type: sqlite, path: /var/lib/x.db}
tasks:
  - &daily
    name: orders_daily
    project: sales
    owner: alice
    output: sales.orders_daily
    type: shell
    command: "load --day ${bizdate} $HOME"
    schedule: "daily 01:30"
    timezone: America/New_York
    depends_on: [orders_hourly, finance.fx_rates]
    self_dependent: true
    params: {region: eu, day: "${bizdate-1}", label: "${region}-${day}"}
    outputs: {row_count: "0"}
    paused: false
    dry_run: true
    single_instance: false
    retries: 2
    retry_backoff: 30s
    timeout: 1h
    resource_group: heavy
  - <<: *daily
    name: orders_daily_copy
  - {name: orders_hourly, project: sales, type: sql, connection: warehouse, sql: "SELECT '${bizdate}'", schedule: "every 15m"}
  - {name: fx_rates, project: finance, type: noop, schedule: "weekly mon,thu 02:00", depends_on: [sales.orders_hourly]}
  - {name: monthly, type: noop, schedule: "monthly 1,15,L 03:00", params: {<<: {a: b}, "": x}}
`,
	"tasks: [{name: a, type: noop, schedule: daily, depends_on: [b]}, {name: b, type: noop, schedule: daily, depends_on: [a]}]\n",
	"tasks:\n  -\n  - x\nconnections: [~, {name: a}]\nresource_groups: [[]]\nbatch: ~\n",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, c := range slices.Concat(validationCases, shapeCases, batchCases) {
		f.Add([]byte(c.yaml))
	}
	env := envOf(map[string]string{"CI_TOKEN": "tok", "PGPASSWORD": "pw", "EMPTY": "", "NAME": "shop"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, env)
		if err != nil {
			if cfg != nil {
				t.Fatal("Parse returned a Config with an error")
			}
			ve, ok := errors.AsType[*ValidationError](err)
			if !ok || len(ve.Problems) == 0 {
				t.Fatalf("error %T %v is no *ValidationError with problems", err, err)
			}
			for _, p := range ve.Problems {
				if p.Message == "" {
					t.Fatalf("problem without a message: %+v", p)
				}
			}
			if _, again := Parse(data, env); again == nil || again.Error() != err.Error() {
				t.Fatalf("Parse is not deterministic:\n%v\nthen\n%v", err, again)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse returned a Config that does not validate: %v", err)
		}
		for _, s := range cfg.Streams {
			for _, p := range append(append(s.Include, s.Exclude...), s.Backfill.Exclude...) {
				if _, err := ParsePattern(p.String()); err != nil {
					t.Fatalf("pattern %q does not read back: %v", p.String(), err)
				}
			}
		}
	})
}
