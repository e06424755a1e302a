package config

import (
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

var oneTask = tasks(nil)

// batchCases cover every check of batch, resource_groups, connections and
// tasks, each with the exact problems reported.
var batchCases = []problemCase{
	// batch.
	{"batch low", "batch: {output_lookback_days: 0, confirm_above: 0, log_limit_bytes: 4095}\n" + oneTask, []Problem{
		{"batch.output_lookback_days", "0 is out of range: use 1 to 3650"},
		{"batch.confirm_above", "0 is out of range: use 1 or more"},
		{"batch.log_limit_bytes", "4095 is out of range: use 4096 to 1073741824"}}},
	{"batch high", "batch: {output_lookback_days: 3651, log_limit_bytes: 1073741825}\n" + oneTask, []Problem{
		{"batch.output_lookback_days", "3651 is out of range: use 1 to 3650"},
		{"batch.log_limit_bytes", "1073741825 is out of range: use 4096 to 1073741824"}}},
	{"batch not a number", "batch: {confirm_above: many}\n" + oneTask, []Problem{
		{"batch.confirm_above", `"many" is not a whole number: use digits, e.g. 10000`}}},
	{"batch timezone", "batch: {timezone: Europe/Pariss}\n" + oneTask, []Problem{
		{"batch.timezone", `unknown time zone "Europe/Pariss": use an IANA time zone name, e.g. Europe/Paris or UTC`}}},
	{"batch timezone local", "batch: {timezone: Local}\n" + oneTask, []Problem{
		{"batch.timezone", `unknown time zone "Local": use an IANA time zone name, e.g. Europe/Paris or UTC`}}},

	// resource_groups.
	{"resource groups", "resource_groups: [{concurrency: 0}, {name: 'a b', concurrency: 10001}, {name: heavy}, {name: heavy}]\n" + oneTask, []Problem{
		{"resource_groups[0].name", "missing: name the group with letters, digits, _ and -, e.g. heavy"},
		{"resource_groups[0].concurrency", "0 is out of range: use 1 to 10000"},
		{"resource_groups[1].name", `"a b" is not a valid name: use letters, digits, _ and -`},
		{"resource_groups[1].concurrency", "10001 is out of range: use 1 to 10000"},
		{"resource_groups[3].name", `"heavy" is used twice (also resource_groups[2]): resource group names must be unique`}}},
	{"resource group unknown", "resource_groups: [{name: heavy}]\n" + tasks(kv{"resource_group": "light"}), []Problem{
		{"tasks[0].resource_group", `no resource group "light": declare it under resource_groups, or use heavy or default`}}},

	// connections.
	{"connection names", "connections: [{type: sqlite, path: a.db}, {name: Warehouse, type: sqlite, path: b.db}, " +
		"{name: w, type: sqlite, path: c.db}, {name: w, type: sqlite, path: d.db}]\n" + oneTask, []Problem{
		{"connections[0].name", "missing: name the connection with lower-case letters, digits and underscores, e.g. warehouse"},
		{"connections[1].name", `"Warehouse" is not a valid name: use lower-case letters, digits and underscores, starting with a letter`},
		{"connections[3].name", `"w" is used twice (also connections[2]): connection names must be unique`}}},
	{"connection types", `connections:
  - {name: a}
  - {name: b, type: mysql}
  - {name: c, type: postgres, path: x.db}
  - {name: d, type: sqlite, dsn: "postgres://u:secret@db/x"}
  - {name: e, type: postgres, dsn: "host=db password=secret"}
` + oneTask, []Problem{
		{"connections[0].type", "missing: use postgres or sqlite"},
		{"connections[1].type", `"mysql" is not supported: use postgres or sqlite`},
		{"connections[2].dsn", "missing: give the connection database as a postgres:// URL"},
		{"connections[2].path", "only sqlite connections have a path: remove it, or use dsn"},
		{"connections[3].path", "missing: give the database file, e.g. path: warehouse.db"},
		{"connections[3].dsn", "only postgres connections have a dsn: remove it, or use path"},
		{"connections[4].dsn", "not a postgres:// URL: " + postgresURLFix}}},
	{"connection dsn port", "connections: [{name: w, type: postgres, dsn: 'postgres://u:secret@db:70000/x'}]\n" + oneTask, []Problem{
		{"connections[0].dsn", `port "70000" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"connection dsn unset", "connections: [{name: w, type: postgres, dsn: '${WAREHOUSE_DSN}'}]\n" + oneTask, []Problem{
		{"connections[0].dsn", "environment variable WAREHOUSE_DSN is not set: set it, or give a default with ${WAREHOUSE_DSN:-default}"}}},

	// Task names.
	{"task names", tasks(kv{"name": ""}, kv{"name": "'a.b'"}, kv{"name": "b", "project": "'x y'"},
		kv{"name": "c"}, kv{"name": "c"}, kv{"name": "c", "project": "other"}), []Problem{
		{"tasks[0].name", "missing: name the task with letters, digits, _ and -, e.g. orders_daily"},
		{"tasks[1].name", `"a.b" is not a valid name: use letters, digits, _ and -`},
		{"tasks[2].project", `"x y" is not a valid project name: use letters, digits, _ and -`},
		{"tasks[4].name", `"c" is used twice in project default (also tasks[3]): task names must be unique within a project`}}},

	// Task types.
	{"task type", tasks(kv{"type": ""}, kv{"name": "b", "type": "python"}), []Problem{
		{"tasks[0].type", "missing: use shell, sql or noop"},
		{"tasks[1].type", `"python" is not supported: use shell, sql or noop`}}},
	{"shell task", "connections: [{name: w, type: sqlite, path: w.db}]\n" +
		tasks(kv{"type": "shell", "connection": "w", "sql": "'SELECT 1'"}), []Problem{
		{"tasks[0].command", "missing: give the command to run, e.g. command: load --day ${bizdate}"},
		{"tasks[0].connection", "only sql tasks have a connection: remove it, or set type: sql"},
		{"tasks[0].sql", "only sql tasks have sql: remove it, or set type: sql"}}},
	{"sql task without connections", tasks(kv{"type": "sql", "command": "run"}), []Problem{
		{"tasks[0].command", "only shell tasks have a command: remove it, or set type: shell"},
		{"tasks[0].connection", "missing: declare the database under connections and name it here"},
		{"tasks[0].sql", "missing: give the statements to run, e.g. sql: DELETE FROM daily WHERE day = '${bizdate}'"}}},
	{"sql task connection", "connections: [{name: w, type: sqlite, path: w.db}, {name: local, type: sqlite, path: l.db}]\n" +
		tasks(kv{"type": "sql", "sql": "'SELECT 1'"}, kv{"name": "b", "type": "sql", "sql": "'SELECT 1'", "connection": "wh"}), []Problem{
		{"tasks[0].connection", "missing: use w or local"},
		{"tasks[1].connection", `no connection "wh": declare it under connections, or use w or local`}}},
	{"noop task", tasks(kv{"command": "run", "connection": "w", "sql": "'SELECT 1'"}), []Problem{
		{"tasks[0].command", "noop tasks run nothing: remove it, or set type: shell or sql"},
		{"tasks[0].connection", "noop tasks run nothing: remove it, or set type: shell or sql"},
		{"tasks[0].sql", "noop tasks run nothing: remove it, or set type: shell or sql"}}},

	// Schedules and time zones.
	{"schedule", tasks(kv{"schedule": ""}, kv{"name": "b", "schedule": "'daily 25:00'"}), []Problem{
		{"tasks[0].schedule", "missing: give a schedule, e.g. daily 01:30, hourly or cron 0 3 * * *"},
		{"tasks[1].schedule", `schedule "daily 25:00": time of day must be HH:MM, 00:00–23:59, e.g. "daily 02:00"; got "25:00"`}}},
	{"task timezone", tasks(kv{"timezone": "Mars/Olympus"}), []Problem{
		{"tasks[0].timezone", `unknown time zone "Mars/Olympus": use an IANA time zone name, e.g. Europe/Paris or UTC`}}},

	// Dependencies.
	{"depends_on", tasks(kv{"name": "orders_hourly"}, kv{"name": "fx_rates", "project": "finance"},
		kv{"name": "b", "depends_on": "[orders_hourli, fx_rates, finance.fx_rate, nothing_like_it, other.thing, b, " +
			"orders_hourly, default.orders_hourly, '']"}), []Problem{
		{"tasks[2].depends_on[0]", `no task "orders_hourli" in project default: did you mean orders_hourly?`},
		{"tasks[2].depends_on[1]", `no task "fx_rates" in project default: did you mean finance.fx_rates?`},
		{"tasks[2].depends_on[2]", `no task "finance.fx_rate": did you mean finance.fx_rates?`},
		{"tasks[2].depends_on[3]", `no task "nothing_like_it" in project default: declare it under tasks, or write project.name for a task of another project`},
		{"tasks[2].depends_on[4]", `no task "other.thing": declare it under tasks, or write project.name for a task of another project`},
		{"tasks[2].depends_on[5]", "a task cannot depend on itself: remove it, or set self_dependent: true to depend on its previous cycle"},
		{"tasks[2].depends_on[7]", "listed twice (also depends_on[6]): keep one"},
		{"tasks[2].depends_on[8]", "empty: name a task of project default, or write project.name for a task of another project"}}},
	{"reads", streams(nil) + tasks(kv{"reads": `[{stream: shop, object: public.orders, date_column: created_at, timezone: Asia/Shanghai},
		{object: public.orders, date_column: d}, {stream: shopp, object: public.orders, date_column: d},
		{stream: shop, date_column: d}, {stream: shop, object: "public.*", date_column: d},
		{stream: shop, object: other.orders, date_column: d}, {stream: shop, object: public.items},
		{stream: shop, object: '"public".orders', date_column: d}, {stream: shop, object: public.x, date_column: d, timezone: Mars/Base},
		{stream: shop, object: '"unclosed', date_column: d}, [shop]]`}), []Problem{
		{"tasks[0].reads[10]", "expected a mapping of keys to values, found a list"},
		{"tasks[0].reads[8].timezone", `unknown time zone "Mars/Base": use an IANA time zone name, e.g. Europe/Paris or UTC`},
		{"tasks[0].reads[1].stream", "missing: name the stream that replicates the table (shop)"},
		{"tasks[0].reads[2].stream", `no stream "shopp": declare it under streams, or use shop`},
		{"tasks[0].reads[3].object", "missing: name the table the task reads, e.g. object: public.orders"},
		{"tasks[0].reads[4].object", `"public.*" names several tables: name one table, without * or ?`},
		{"tasks[0].reads[5].object", "stream shop does not replicate other.orders: add it to the stream's include (or remove it from exclude)"},
		{"tasks[0].reads[6].date_column", "missing: name the column that places a row on a business date (a date, timestamp or timestamptz column)"},
		{"tasks[0].reads[7]", "reads public.orders of stream shop again (also reads[0]): keep one"},
		{"tasks[0].reads[9].object", `table pattern "\"unclosed": unterminated double quote: close the quoted name with "`}}},
	{"late_after", streams(nil) + tasks(kv{"reads": `[{stream: shop, object: public.a, date_column: d, late_after: 1w},
		{stream: shop, object: public.b, date_column: d, late_after: 30s}, {stream: shop, object: public.c, date_column: d, late_after: 3651d},
		{stream: shop, object: public.d, date_column: d, late_after: 2d}, {stream: shop, object: public.e, date_column: d, late_after: 36h}]`}), []Problem{
		{"tasks[0].reads[0].late_after", `"1w" is not an age: use whole days or a duration, e.g. 1d, 36h or 90m`},
		{"tasks[0].reads[1].late_after", "30s is out of range: use 1m to 3650d, or leave it out for no late data"},
		{"tasks[0].reads[2].late_after", "87624h0m0s is out of range: use 1m to 3650d, or leave it out for no late data"}}},
	{"reads key", streams(nil) + tasks(kv{"reads": "[{stream: shop, object: public.orders, date_column: d, time_zone: UTC}]"}), []Problem{
		{"tasks[0].reads[0].time_zone", "unknown key (line 2): did you mean timezone?"}}},
	{"on_change", streams(nil) + tasks(kv{"name": "a", "reads": "[{stream: shop, object: public.orders, date_column: d}]",
		"on_change": "{action: rerun, settle: -1s, max_per_day: 0}"},
		kv{"name": "b", "on_change": "{action: propose}"},
		kv{"name": "c", "reads": "[{stream: shop, object: public.orders, date_column: d}]",
			"on_change": "{action: run, settle: 25h, max_per_day: 101, backfill: {task: x, dates: {from: 2026-01-01}, groups: 20, colour: red}}"},
		kv{"name": "d", "reads": "[{stream: shop, object: public.orders, date_column: d}]",
			"on_change": "{action: run, backfill: {task: x, dates: {from: 2026-01-01}, groups: 20, order: sideways}}"},
		kv{"name": "e", "reads": "[{stream: shop, object: public.orders, date_column: d}]", "on_change": "{backfill: [1]}"}), []Problem{
		{"tasks[0].on_change.action", `"rerun" is not supported: use off, propose or run`},
		{"tasks[0].on_change.settle", "-1s is out of range: use 0 (act at once) or more, e.g. 10m"},
		{"tasks[0].on_change.max_per_day", "0 is out of range: use 1 to 100"},
		{"tasks[1].on_change.action", "propose needs reads: name the streamed objects the task reads under reads, or set action: off"},
		{"tasks[2].on_change.backfill", `unknown field "colour": use the options of a batch backfill request (docs/batch-planner.md)`},
		{"tasks[2].on_change.settle", "25h0m0s is out of range: use 0 to 24h"},
		{"tasks[2].on_change.max_per_day", "101 is out of range: use 1 to 100"},
		{"tasks[3].on_change.backfill.task", "chosen by tidemark (the task and the changed dates): remove it"},
		{"tasks[3].on_change.backfill.dates", "chosen by tidemark (the task and the changed dates): remove it"},
		{"tasks[3].on_change.backfill", `order: unknown value "sideways"; use one of asc, desc`},
		{"tasks[4].on_change.backfill", "expected a mapping of batch backfill options, e.g. {scope: {mode: list, downstream: -1}}"}}},
	{"cycle", tasks(kv{"name": "a", "depends_on": "[c]"}, kv{"name": "b", "depends_on": "[a]", "self_dependent": "true"},
		kv{"name": "c", "depends_on": "[b]"}, kv{"name": "d", "depends_on": "[c]"}), []Problem{
		{"tasks", "the tasks' dependencies form a cycle: default.a → default.b → default.c → default.a: " +
			"remove one of the depends_on entries on the cycle"}}},

	// Params and outputs.
	{"params", tasks(kv{"params": "{1x: a, y: [b], y: c}", "outputs": "{n: 0, n: 1, 'a-b': 2}"}), []Problem{
		{"tasks[0].params.y", "expected a single value, found a list"},
		{"tasks[0].params.y", "listed twice (second time on line 1): keep one"},
		{"tasks[0].outputs.n", "listed twice (second time on line 1): keep one"},
		{"tasks[0].params.1x", `"1x" is not a valid name: use letters, digits and _, starting with a letter or _`},
		{"tasks[0].outputs.a-b", `"a-b" is not a valid name: use letters, digits and _, starting with a letter or _`}}},
	{"params shape", tasks(kv{"params": "[a]", "outputs": "x"}), []Problem{
		{"tasks[0].params", "expected a mapping of names to values, found a list"},
		{"tasks[0].outputs", "expected a mapping of names to values, found a single value"}}},
	{"params merge key", "tasks:\n  - name: a\n    type: noop\n    schedule: daily\n    params:\n      <<: {x: 1}\n      [k]: v\n", []Problem{
		{"tasks[0].params.<<", "merge keys are not supported here: list each entry"},
		{"tasks[0].params.?", "the name is not plain text: write name: value"}}},

	{"params case", tasks(kv{"params": "{region: a, Region: b}"}), []Problem{
		{"tasks[0].params.Region", `differs from "region" only in case, and shell tasks receive both as TIDEMARK_PARAM_REGION: rename one`}}},

	// Free text where it cannot be passed as data.
	{"shell free text quoted", tasks(kv{"type": "shell", "params": "{p: x}", "command": `"echo '${p}'"`},
		kv{"name": "b", "type": "shell", "params": "{p: x}", "command": `"cat <<EOF\n${param.p}\nEOF"`}), []Problem{
		{"tasks[0].command", `task default.a: at byte 6, ${p}: a parameter or output inside single quotes cannot be passed safely: ` +
			`nothing expands inside single quotes: close them before the reference and write it inside double quotes, e.g. 'abc'"${…}"`},
		{"tasks[1].command", `task default.b: at byte 10, ${param.p}: a parameter or output inside a here-document cannot be passed safely: ` +
			`a here-document usually feeds another interpreter, where the value would become code: read the value from the environment inside it (see docs/batch-runners.md) or pass it as an argument`}}},
	{"sql free text in a literal", "connections: [{name: w, type: sqlite, path: w.db}]\n" +
		tasks(kv{"type": "sql", "connection": "w", "params": "{p: x}", "sql": `"SELECT 'day ${p}'"`}), []Problem{
		{"tasks[0].sql", `task default.a: at byte 12, ${p}: a parameter or output inside a longer string literal (or E'…') cannot be bound: ` +
			`write the literal as a concatenation, e.g. 'prefix ' || ${p} || ' suffix', or the reference alone as '${p}'`}}},

	// Env.
	{"env", tasks(kv{"type": "shell", "command": "env", "env": "[SECRET, 'A-B', TIDEMARK_API_TOKEN, PATH, SECRET]"},
		kv{"name": "b", "env": "[X]"}), []Problem{
		{"tasks[0].env[1]", `"A-B" is not a variable name: use letters, digits and _, starting with a letter or _`},
		{"tasks[0].env[2]", "TIDEMARK_API_TOKEN: TIDEMARK_ variables are tidemark's own (its API token among them) and never passed to a task: remove it"},
		{"tasks[0].env[3]", "PATH is passed to every shell task: remove it"},
		{"tasks[0].env[4]", "SECRET is listed twice: keep one"},
		{"tasks[1].env", "only shell tasks have env: remove it, or set type: shell"}}},

	// Retries.
	{"retries low", tasks(kv{"retries": "-1", "retry_backoff": "-1s", "timeout": "-1s"}), []Problem{
		{"tasks[0].retries", "-1 is out of range: use 0 to 100"},
		{"tasks[0].retry_backoff", "-1s is out of range: use 0 (retry at once) or more, e.g. 10s"},
		{"tasks[0].timeout", "-1s is out of range: use 0 (no timeout) or more, e.g. 1h"}}},
	{"retries high", tasks(kv{"retries": "101"}), []Problem{
		{"tasks[0].retries", "101 is out of range: use 0 to 100"}}},

	// Conversions.
	{"task conversions", tasks(kv{"command": "[run]", "paused": "sometimes", "retries": "two", "timeout": "5",
		"depends_on": "[[b]]"}), []Problem{
		{"tasks[0].command", "expected a single value, found a list"},
		{"tasks[0].paused", `"sometimes" is not true or false`},
		{"tasks[0].retries", `"two" is not a whole number: use digits, e.g. 0`},
		{"tasks[0].timeout", `"5" is not a duration: use a number with a unit, e.g. 500ms, 10s or 1m`},
		{"tasks[0].depends_on[0]", "expected a single value, found a list"}}},
	{"task env", tasks(kv{"name": "'${TASK_NAME}'"}), []Problem{
		{"tasks[0].name", "environment variable TASK_NAME is not set: set it, or give a default with ${TASK_NAME:-default}"}}},

	// Shape and order.
	{"unknown task key", tasks(kv{"dependson": "[b]"}), []Problem{
		{"tasks[0].dependson", "unknown key (line 1): did you mean depends_on?"}}},
	{"unknown batch key", "batch: {timezon: UTC, lookback: 3}\n" + oneTask, []Problem{
		{"batch.timezon", "unknown key (line 1): did you mean timezone?"},
		{"batch.lookback", "unknown key (line 1): use one of timezone, output_lookback_days, confirm_above, log_limit_bytes"}}},
	{"bad task keeps indexes", "tasks:\n  - x\n  - " + task(kv{"name": "'a b'"}), []Problem{
		{"tasks[0]", "expected a mapping of keys to values, found a single value"},
		{"tasks[1].name", `"a b" is not a valid name: use letters, digits, _ and -`}}},
	{"wrong kinds", "batch: [a]\nresource_groups: {a: 1}\nconnections: x\ntasks: {a: b}\n", []Problem{
		{"batch", "expected a mapping of keys to values, found a list"},
		{"resource_groups", "expected a list, found a mapping"},
		{"connections", "expected a list, found a single value"},
		{"tasks", "expected a list, found a mapping"}}},
	{"order follows the file", tasks(kv{"retries": "x"}) + streams(kv{"name": "Bad"}) + "connections: [{name: w}]\n", []Problem{
		{"streams[0].name", `"Bad" is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter`},
		{"connections[0].type", "missing: use postgres or sqlite"},
		{"tasks[0].retries", `"x" is not a whole number: use digits, e.g. 0`}}},
}

func TestBatchValidationErrors(t *testing.T) {
	checkCases(t, batchCases)
}

// TestTaskExpressions checks which values are checked as expressions and
// with which names; the messages are the expr package's.
func TestTaskExpressions(t *testing.T) {
	cfg := mustParse(t, `
connections: [{name: w, type: sqlite, path: w.db}]
tasks:
  - {name: up, type: noop, schedule: daily, outputs: {row_count: "0"}}
  - name: a
    type: shell
    schedule: daily
    depends_on: [up]
    params: {day: "${bizdate}", prev: "${day}", rows: "${outputs.up.row_count}", all: "${outputs.default.up.row_count}"}
    command: "load ${day} ${param.prev} ${outputs.up.row_count}"
  - name: b
    type: sql
    connection: w
    schedule: daily
    params: {day: "${bizdate}"}
    sql: "DELETE FROM t WHERE day = '${day}'"
`, nil)
	if len(cfg.Tasks) != 3 {
		t.Fatalf("tasks = %+v", cfg.Tasks)
	}

	_, err := Parse([]byte(`
connections: [{name: w, type: sqlite, path: w.db}]
tasks:
  - name: a
    type: shell
    schedule: daily
    params: {early: "${late}", late: "${bizdate}", odd: "${"}
    command: "load ${nope}"
  - {name: b, type: sql, connection: w, schedule: daily, sql: "SELECT '${nope}'"}
  - {name: b, project: other, type: noop, schedule: daily}
  - name: c
    type: noop
    schedule: daily
    depends_on: [b, other.b]
    params: {shared: "${outputs.b.x}", mine: "${outputs.default.b.x}", theirs: "${outputs.other.b.x}"}
`), nil)
	ve, ok := err.(*ValidationError)
	if !ok {
		t.Fatalf("Parse error %v", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
		if p.Message == "" {
			t.Errorf("%s: no message", p.Path)
		}
	}
	// Two upstream tasks named b: only their IDs name them.
	want := "tasks[0].params.early tasks[0].params.odd tasks[0].command tasks[1].sql tasks[3].params.shared"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("problems at %s, want %s:\n%v", got, want, err)
	}
}

// TestDateColumnsGathered: a stream gets its tables' date columns from
// the tasks that read them, each once, and per column the shortest
// late_after with its read's time zone, of tasks that act on changes.
func TestDateColumnsGathered(t *testing.T) {
	yaml := streams(nil) + tasks(
		kv{"name": "a", "reads": "[{stream: shop, object: public.orders, date_column: day, late_after: 2d}]", "on_change": "{action: run}"},
		kv{"name": "b", "reads": "[{stream: shop, object: public.orders, date_column: day, late_after: 1d, timezone: Asia/Tokyo}]", "on_change": "{action: propose}"},
		kv{"name": "c", "reads": "[{stream: shop, object: public.items, date_column: day, late_after: 1h}, {stream: shop, object: public.orders, date_column: at}]"})
	cfg, err := Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0]
	orders, items := change.TableID{Schema: "public", Name: "orders"}, change.TableID{Schema: "public", Name: "items"}
	if got := strings.Join(s.DateColumns[orders], ","); got != "day,at" || strings.Join(s.DateColumns[items], ",") != "day" {
		t.Errorf("date columns %v", s.DateColumns)
	}
	rules := s.LateData[orders]
	if len(rules) != 1 || rules[0].Column != "day" || rules[0].After != 24*time.Hour || rules[0].Location.String() != "Asia/Tokyo" || len(s.LateData[items]) != 0 {
		t.Errorf("late data rules %+v, want day after 24h in Asia/Tokyo", s.LateData)
	}
}
