package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
)

const minimalTaskYAML = `
tasks:
  - name: nightly
    type: noop
    schedule: daily
`

// TestBatchDefaults also checks that tasks without streams are a valid
// configuration.
func TestBatchDefaults(t *testing.T) {
	cfg := mustParse(t, minimalTaskYAML, nil)
	task := &cfg.Tasks[0]
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"streams", len(cfg.Streams), 0},
		{"batch.timezone", cfg.Batch.Timezone, time.UTC},
		{"batch.timezone name", cfg.Batch.TimezoneName, "UTC"},
		{"batch.output_lookback_days", cfg.Batch.OutputLookbackDays, 15},
		{"batch.confirm_above", cfg.Batch.ConfirmAbove, 10000},
		{"batch.log_limit_bytes", cfg.Batch.LogLimitBytes, 1 << 20},
		{"resource_groups", cfg.ResourceGroups, []ResourceGroup{{Name: "default", Concurrency: 4}}},
		{"connections", len(cfg.Connections), 0},
		{"id", task.ID, "default.nightly"},
		{"project", task.Project, "default"},
		{"owner", task.Owner, ""},
		{"output", task.Output, ""},
		{"schedule", task.Schedule.String(), "daily"},
		{"schedule location", task.Schedule.Location, time.UTC},
		{"depends_on", len(task.Upstream), 0},
		{"self_dependent", task.SelfDependent, false},
		{"params", len(task.Params), 0},
		{"outputs", len(task.Outputs), 0},
		{"paused", task.Paused, false},
		{"dry_run", task.DryRun, false},
		{"single_instance", task.SingleInstance, false},
		{"retries", task.Retries, 0},
		{"retry_backoff", task.RetryBackoff, 10 * time.Second},
		{"timeout", task.Timeout, time.Duration(0)},
		{"resource_group", task.ResourceGroup, "default"},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}

	// Without tasks the defaults are the same.
	cfg = mustParse(t, minimalYAML, nil)
	if cfg.Batch.TimezoneName != "UTC" || cfg.Batch.ConfirmAbove != 10000 || len(cfg.ResourceGroups) != 1 || cfg.Tasks != nil {
		t.Errorf("batch without tasks: %+v %+v %+v", cfg.Batch, cfg.ResourceGroups, cfg.Tasks)
	}
}

func TestBatchEmptyMeansDefault(t *testing.T) {
	cfg := mustParse(t, `
batch: {timezone: "", output_lookback_days: "${UNSET:-}", confirm_above: ~}
resource_groups: [{name: heavy, concurrency: ""}]
tasks:
  - {name: nightly, type: noop, schedule: daily, project: "", timezone: "", retries: "", retry_backoff: "", resource_group: ""}
`, nil)
	want := mustParse(t, minimalTaskYAML+"resource_groups: [{name: heavy}]\n", nil)
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
	if g, _ := cfg.ResourceGroup("heavy"); g.Concurrency != 4 {
		t.Errorf("heavy = %+v", g)
	}
}

func TestFullBatchConfig(t *testing.T) {
	cfg := mustParse(t, `
batch:
  timezone: ${TZ_NAME}
  output_lookback_days: 30
  confirm_above: 500
  log_limit_bytes: 65_536
resource_groups:
  - {name: default, concurrency: 8}
  - {name: heavy, concurrency: "${HEAVY:-2}"}
connections:
  - {name: warehouse, type: postgres, dsn: "${WAREHOUSE_DSN}"}
  - {name: local, type: sqlite, path: /var/lib/x.db}
tasks:
  - name: orders_daily
    project: sales
    owner: alice
    output: sales.orders_daily
    type: shell
    command: "load --day ${bizdate} --home $HOME"
    schedule: "daily 01:30"
    depends_on: [orders_hourly, finance.fx_rates]
    self_dependent: true
    params: {region: eu, day: "${bizdate-1}", label: "${region}-${day}", empty: ~}
    outputs: {row_count: "0", note: }
    paused: true
    dry_run: true
    single_instance: true
    retries: 2
    retry_backoff: 30s
    timeout: 1h
    resource_group: heavy
  - name: orders_hourly
    project: sales
    type: sql
    connection: warehouse
    sql: "INSERT INTO t SELECT * FROM s WHERE day = '${bizdate}'"
    schedule: hourly
    timezone: America/New_York
  - {name: fx_rates, project: finance, type: noop, schedule: "${FX_SCHEDULE}"}
`, map[string]string{
		"TZ_NAME": "Europe/Paris", "WAREHOUSE_DSN": "postgres://u:pw@db/wh", "FX_SCHEDULE": "cron 0 3 * * *",
		"bizdate": "env-bizdate", "HOME": "/root",
	})
	paris, _ := time.LoadLocation("Europe/Paris")
	newYork, _ := time.LoadLocation("America/New_York")
	wantBatch := BatchSettings{Timezone: paris, TimezoneName: "Europe/Paris", OutputLookbackDays: 30, ConfirmAbove: 500, LogLimitBytes: 65536}
	if got := cfg.Batch; got.TimezoneName != wantBatch.TimezoneName || got.Timezone.String() != "Europe/Paris" ||
		got.OutputLookbackDays != 30 || got.ConfirmAbove != 500 || got.LogLimitBytes != 65536 {
		t.Errorf("batch = %+v, want %+v", got, wantBatch)
	}
	wantGroups := []ResourceGroup{{"default", 8}, {"heavy", 2}}
	if !reflect.DeepEqual(cfg.ResourceGroups, wantGroups) {
		t.Errorf("resource groups = %+v, want %+v", cfg.ResourceGroups, wantGroups)
	}
	wantConns := []Connection{{Name: "warehouse", Type: "postgres", DSN: "postgres://u:pw@db/wh"}, {Name: "local", Type: "sqlite", Path: "/var/lib/x.db"}}
	if !reflect.DeepEqual(cfg.Connections, wantConns) {
		t.Errorf("connections = %+v, want %+v", cfg.Connections, wantConns)
	}

	want := []dag.Task{{
		ID: "sales.orders_daily", Name: "orders_daily", Project: "sales", Owner: "alice", Output: "sales.orders_daily",
		Type: "shell",
		// Literal: ${bizdate} is not taken from the environment.
		Command:       "load --day ${bizdate} --home $HOME",
		Schedule:      mustSchedule(t, "daily 01:30", paris),
		Upstream:      []string{"sales.orders_hourly", "finance.fx_rates"},
		SelfDependent: true,
		Params: []dag.Param{{Name: "region", Value: "eu"}, {Name: "day", Value: "${bizdate-1}"},
			{Name: "label", Value: "${region}-${day}"}, {Name: "empty", Value: ""}},
		Outputs:        []dag.Param{{Name: "row_count", Value: "0"}, {Name: "note", Value: ""}},
		Paused:         true,
		DryRun:         true,
		SingleInstance: true,
		Retries:        2,
		RetryBackoff:   30 * time.Second,
		Timeout:        time.Hour,
		ResourceGroup:  "heavy",
	}, {
		ID: "sales.orders_hourly", Name: "orders_hourly", Project: "sales", Type: "sql", Connection: "warehouse",
		SQL:           "INSERT INTO t SELECT * FROM s WHERE day = '${bizdate}'",
		Schedule:      mustSchedule(t, "hourly", newYork),
		RetryBackoff:  10 * time.Second,
		ResourceGroup: "default",
	}, {
		ID: "finance.fx_rates", Name: "fx_rates", Project: "finance", Type: "noop",
		Schedule:      mustSchedule(t, "cron 0 3 * * *", paris),
		RetryBackoff:  10 * time.Second,
		ResourceGroup: "default",
	}}
	if len(cfg.Tasks) != len(want) {
		t.Fatalf("%d tasks, want %d", len(cfg.Tasks), len(want))
	}
	for i := range want {
		got, w := cfg.Tasks[i], want[i]
		if got.Schedule.String() != w.Schedule.String() || got.Schedule.Location.String() != w.Schedule.Location.String() {
			t.Errorf("tasks[%d].schedule = %v in %v, want %v in %v", i, got.Schedule, got.Schedule.Location, w.Schedule, w.Schedule.Location)
		}
		got.Schedule, w.Schedule = calendar.Schedule{}, calendar.Schedule{}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("tasks[%d]\n got %+v\nwant %+v", i, got, w)
		}
	}
}

func mustSchedule(t *testing.T, spec string, loc *time.Location) calendar.Schedule {
	t.Helper()
	s, err := calendar.Parse(spec, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBatchLookups(t *testing.T) {
	cfg := mustParse(t, `
resource_groups: [{name: heavy, concurrency: 2}]
connections: [{name: local, type: sqlite, path: x.db}]
`+minimalTaskYAML, nil)
	if c, ok := cfg.Connection("local"); !ok || c != &cfg.Connections[0] {
		t.Errorf("Connection(local) = %v, %v", c, ok)
	}
	if _, ok := cfg.Connection("nope"); ok {
		t.Error("Connection(nope) found a connection")
	}
	if g, ok := cfg.ResourceGroup("heavy"); !ok || g != &cfg.ResourceGroups[0] || g.Concurrency != 2 {
		t.Errorf("ResourceGroup(heavy) = %v, %v", g, ok)
	}
	// The default group is added after the declared ones.
	if g, ok := cfg.ResourceGroup(DefaultResourceGroup); !ok || g != &cfg.ResourceGroups[1] || g.Concurrency != 4 {
		t.Errorf("ResourceGroup(default) = %v, %v", g, ok)
	}
	if _, ok := cfg.ResourceGroup("nope"); ok {
		t.Error("ResourceGroup(nope) found a group")
	}
	if task, ok := cfg.Task("default.nightly"); !ok || task != &cfg.Tasks[0] {
		t.Errorf("Task(default.nightly) = %v, %v", task, ok)
	}
	if _, ok := cfg.Task("nightly"); ok {
		t.Error("Task takes a name for an ID")
	}
}

// TestValidateBatchLiteral checks a Config built without Parse.
func TestValidateBatchLiteral(t *testing.T) {
	cfg := mustParse(t, minimalTaskYAML, nil)
	cfg.Batch.Timezone = nil
	cfg.ResourceGroups = nil
	task := &cfg.Tasks[0]
	task.ID = "x"
	task.Project = ""
	task.Schedule = calendar.Schedule{}
	wantProblems(t, cfg.Validate(),
		Problem{"batch.timezone", "missing: use an IANA time zone name, e.g. Europe/Paris or UTC"},
		Problem{"tasks[0].project", "missing: leave it out to use default"},
		Problem{"tasks[0].schedule", "missing: give a schedule, e.g. daily 01:30, hourly or cron 0 3 * * *"},
		Problem{"tasks[0].resource_group", `no resource group "default": declare it under resource_groups`},
	)

	cfg = mustParse(t, minimalTaskYAML, nil)
	cfg.Tasks[0].ID = "other.nightly"
	wantProblems(t, cfg.Validate(), Problem{"tasks[0]", `ID "other.nightly" is not project.name: set it to "default.nightly"`})
}

func TestTaskAnchorsAndMergeKeys(t *testing.T) {
	cfg := mustParse(t, `
tasks:
  - &base
    name: one
    type: shell
    command: "run ${day}"
    schedule: daily 02:00
    params: &params {day: "${bizdate}"}
    retries: 3
  - <<: *base
    name: two
    depends_on: [one]
  - {name: three, type: noop, schedule: hourly, params: *params}
`, nil)
	two, _ := cfg.Task("default.two")
	if two.Command != "run ${day}" || two.Retries != 3 || two.Schedule.String() != "daily 02:00" ||
		!reflect.DeepEqual(two.Params, []dag.Param{{Name: "day", Value: "${bizdate}"}}) ||
		!reflect.DeepEqual(two.Upstream, []string{"default.one"}) {
		t.Errorf("merged task = %+v", two)
	}
	if three, _ := cfg.Task("default.three"); len(three.Params) != 1 {
		t.Errorf("aliased params = %+v", three.Params)
	}
}
