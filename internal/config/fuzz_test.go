package config

import (
	"errors"
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
  tokens:
    - {name: ci, token: "${CI_TOKEN}"}
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
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, c := range append(validationCases, shapeCases...) {
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
