package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// stream returns a valid stream as a YAML flow mapping, with the keys in
// over replacing, or for "", removing the minimal stream's.
func stream(over map[string]string) string {
	return flow(map[string]string{
		"name":        "shop",
		"source":      `{dsn: "postgres://tidemark:secret@db/shop"}`,
		"destination": "{type: sqlite, path: replica.db}",
		"include":     "[public.*]",
	}, over)
}

// task returns a valid task as a YAML flow mapping, like stream.
func task(over map[string]string) string {
	return flow(map[string]string{"name": "a", "type": "noop", "schedule": "daily"}, over)
}

func tasks(over ...map[string]string) string {
	var s []string
	for _, o := range over {
		s = append(s, task(o))
	}
	return "tasks: [" + strings.Join(s, ", ") + "]\n"
}

// flow returns fields as a YAML flow mapping, with the keys in over
// replacing, or for "", removing theirs.
func flow(fields, over map[string]string) string {
	fields = maps.Clone(fields)
	maps.Copy(fields, over)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if fields[k] != "" {
			parts = append(parts, k+": "+fields[k])
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func streams(over ...map[string]string) string {
	var s []string
	for _, o := range over {
		s = append(s, stream(o))
	}
	return "streams: [" + strings.Join(s, ", ") + "]\n"
}

type kv = map[string]string

type problemCase struct {
	name string
	yaml string
	want []Problem
}

var one = streams(nil)

const roleMissing = "missing: give the token a role: viewer (reads), operator (also starts and stops backfills and batch runs) or admin (also pauses, resumes and resets streams, and filters backfills)"

// validationCases cover every check, each with the exact problems reported.
var validationCases = []problemCase{
	// Top level.
	{"no streams", "", []Problem{{"streams", "no streams and no tasks: add at least one stream or task"}}},
	{"empty streams", "streams: []", []Problem{{"streams", "no streams and no tasks: add at least one stream or task"}}},
	{"metadata scheme", "metadata: mysql://root:secret@db\n" + one, []Problem{{"metadata",
		"not a sqlite:// or postgres:// URL: use e.g. sqlite://tidemark.db or postgres://user:password@host:5432/dbname"}}},
	{"metadata sqlite no file", "metadata: sqlite://\n" + one, []Problem{{"metadata",
		"no file after sqlite://: use e.g. sqlite://tidemark.db"}}},
	{"metadata bad postgres", "metadata: 'postgres://u:secret@db:port/x'\n" + one, []Problem{{"metadata",
		"not a postgres:// URL: " + postgresURLFix}}},
	{"listen", "api: {listen: localhost}\n" + one, []Problem{{"api.listen",
		`"localhost" is not a host:port address: use e.g. 127.0.0.1:7420`}}},
	{"listen port", "api: {listen: 'localhost:99999'}\n" + one, []Problem{{"api.listen",
		`"99999" is not a port: use a number from 0 to 65535`}}},
	{"token fields", "api: {tokens: [{name: ci, role: viewer}, {token: secret, role: admin}]}\n" + one, []Problem{
		{"api.tokens[0].token", "missing: set the token, e.g. token: ${CI_TOKEN}"},
		{"api.tokens[1].name", "missing: name the token after its user, e.g. ci"}}},
	{"token twice", "api: {tokens: [{name: ci, token: secret, role: viewer}, {name: ci, token: secret, role: viewer}]}\n" + one, []Problem{
		{"api.tokens[1].name", `"ci" is used twice (also api.tokens[0]): token names must be unique`},
		{"api.tokens[1].token", "same token as api.tokens[0]: give every user a token of its own"}}},
	{"token roles", "api: {tokens: [{name: a, token: secret-a}, {name: b, token: secret-b, role: root}, {name: c, token: secret-c, role: Admin}]}\n" + one, []Problem{
		{"api.tokens[0].role", roleMissing},
		{"api.tokens[1].role", `"root" is not a role: use viewer, operator or admin`},
		{"api.tokens[2].role", `"Admin" is not a role: use viewer, operator or admin`}}},
	{"listen beyond loopback", "api: {listen: ':7420'}\n" + one, []Problem{{"api.allowed_hosts",
		`api.listen ":7420" is beyond loopback: list the names and addresses clients use to reach the daemon (e.g. allowed_hosts: [tidemark.example.com, 10.0.0.0/8]), or listen on 127.0.0.1`}}},
	{"listen on an address", "api: {listen: '10.1.2.3:7420', allowed_hosts: []}\n" + one, []Problem{{"api.allowed_hosts",
		`api.listen "10.1.2.3:7420" is beyond loopback: list the names and addresses clients use to reach the daemon (e.g. allowed_hosts: [tidemark.example.com, 10.0.0.0/8]), or listen on 127.0.0.1`}}},
	{"allowed hosts", "api: {listen: '0.0.0.0:7420', allowed_hosts: ['http://x.example', 'x.example:7420', '', 'a b', 'ok.example', '10.0.0.0/33', 'fe80::1']}\n" + one, []Problem{
		{"api.allowed_hosts[0]", `"http://x.example" is not a host name, an IP address or an IP network: write a name as clients type it, without scheme or port (tidemark.example.com), an address (10.0.0.5) or a network (10.0.0.0/8)`},
		{"api.allowed_hosts[1]", `"x.example:7420" is not a host name, an IP address or an IP network: write a name as clients type it, without scheme or port (tidemark.example.com), an address (10.0.0.5) or a network (10.0.0.0/8)`},
		{"api.allowed_hosts[2]", `"" is not a host name, an IP address or an IP network: write a name as clients type it, without scheme or port (tidemark.example.com), an address (10.0.0.5) or a network (10.0.0.0/8)`},
		{"api.allowed_hosts[3]", `"a b" is not a host name, an IP address or an IP network: write a name as clients type it, without scheme or port (tidemark.example.com), an address (10.0.0.5) or a network (10.0.0.0/8)`},
		{"api.allowed_hosts[5]", `"10.0.0.0/33" is not a host name, an IP address or an IP network: write a name as clients type it, without scheme or port (tidemark.example.com), an address (10.0.0.5) or a network (10.0.0.0/8)`}}},
	{"log", "log: {level: trace, format: xml}\n" + one, []Problem{
		{"log.level", `"trace" is not supported: use debug, info, warn or error`},
		{"log.format", `"xml" is not supported: use auto, json or text`}}},

	// Stream names.
	{"name missing", streams(kv{"name": ""}), []Problem{{"streams[0].name",
		"missing: name the stream with lower-case letters, digits and underscores, e.g. shop"}}},
	{"name invalid", streams(kv{"name": "Shop-1"}), []Problem{{"streams[0].name",
		`"Shop-1" is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter`}}},
	{"name digit first", streams(kv{"name": "'1shop'"}), []Problem{{"streams[0].name",
		`"1shop" is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter`}}},
	{"name too long", streams(kv{"name": strings.Repeat("a", 49)}), []Problem{{"streams[0].name",
		`"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..." is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter`}}},
	{"name twice", streams(nil, kv{"source": `{dsn: "postgres://db/other"}`}), []Problem{{"streams[1].name",
		`"shop" is used twice (also streams[0]): stream names must be unique`}}},

	// Source.
	{"source type", streams(kv{"source": `{type: oracle, dsn: "postgres://db/x"}`}), []Problem{{"streams[0].source.type",
		`"oracle" is not supported: use postgres or mysql`}}},
	{"mysql source dsn", streams(kv{"source": `{type: mysql, dsn: "postgres://db/x"}`}), []Problem{{"streams[0].source.dsn",
		"not a mysql:// URL: write mysql://user:password@host:3306/dbname, percent-encoding special characters (e.g. @ as %40)"}}},
	{"mysql source without database", streams(kv{"source": `{type: mysql, dsn: "mysql://u:p@db:3306/"}`}), []Problem{{"streams[0].source.dsn",
		"names no database: write mysql://user:password@host:3306/dbname, percent-encoding special characters (e.g. @ as %40)"}}},
	{"mysql source port", streams(kv{"source": `{type: mysql, dsn: "mysql://u:p@db:99999/shop"}`}), []Problem{{"streams[0].source.dsn",
		`port "99999" is out of range: use a port from 1 to 65535, or leave it out for 3306`}}},
	{"mysql source with a slot", streams(kv{"source": `{type: mysql, dsn: "mysql://u:p@db/shop", slot: s1, publication: p1}`}), []Problem{
		{"streams[0].source.publication", "applies to postgres sources only (a mysql source reads the binlog, which carries every table): remove it"},
		{"streams[0].source.slot", "applies to postgres sources only (a mysql source reads the binlog, which carries every table): remove it"}}},
	{"publication mode", streams(kv{"source": `{dsn: "postgres://db/x", publication_mode: existng}`}), []Problem{{"streams[0].source.publication_mode",
		`"existng" is not supported: use managed or existing`}}},
	{"publication mode on mysql", streams(kv{"source": `{type: mysql, dsn: "mysql://u:p@db/shop", publication_mode: existing}`}), []Problem{
		{"streams[0].source.publication_mode", "applies to postgres sources only (a mysql source reads the binlog, which carries every table): remove it"}}},
	{"mysql server id", streams(kv{"source": `{type: mysql, dsn: "mysql://u:p@db/shop", server_id: 0}`}), []Problem{{"streams[0].source.server_id",
		`"0" is not a server id: use a whole number from 1 to 4294967295 that no other replica of the server uses, or leave it out to derive one from the stream's name`}}},
	{"server id on postgres", streams(kv{"source": `{dsn: "postgres://db/x", server_id: 7}`}), []Problem{{"streams[0].source.server_id",
		"applies to mysql sources only: remove it"}}},
	{"source dsn missing", streams(kv{"source": "{}"}), []Problem{{"streams[0].source.dsn",
		"missing: give the source database as a postgres:// URL"}}},
	{"source dsn keywords", streams(kv{"source": "{dsn: 'host=db password=secret'}"}), []Problem{{"streams[0].source.dsn",
		"not a postgres:// URL: " + postgresURLFix}}},
	{"source dsn unescaped", streams(kv{"source": "{dsn: 'postgres://u:sec ret@db/x'}"}), []Problem{{"streams[0].source.dsn",
		"not a postgres:// URL: " + postgresURLFix}}},
	{"source dsn port", streams(kv{"source": "{dsn: 'postgres://u:secret@db:99999/x'}"}), []Problem{{"streams[0].source.dsn",
		`port "99999" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"source dsn port zero", streams(kv{"source": "{dsn: 'postgres://u:secret@db:0/x'}"}), []Problem{{"streams[0].source.dsn",
		`port "0" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"source dsn port of a second host", streams(kv{"source": "{dsn: 'postgres://u:secret@a:1,b:65536/x'}"}), []Problem{{"streams[0].source.dsn",
		`port "65536" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"source dsn port parameter", streams(kv{"source": "{dsn: 'postgresql://db/x?sslmode=disable&port=5432,-1'}"}), []Problem{{"streams[0].source.dsn",
		`port "-1" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"metadata port", "metadata: 'postgres://u:secret@db:65536/x'\n" + one, []Problem{{"metadata",
		`port "65536" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"publication too long", streams(kv{"source": `{dsn: "postgres://db/x", publication: ` + strings.Repeat("p", 64) + "}"}),
		[]Problem{{"streams[0].source.publication",
			`"ppppppppppppppppppppppppppppppppppppp..." is not a valid publication name: use at most 63 bytes`}}},
	{"slot", streams(kv{"source": `{dsn: "postgres://db/x", slot: Bad-Slot}`}), []Problem{{"streams[0].source.slot",
		`"Bad-Slot" is not a valid slot name: use 1 to 63 lower-case letters, digits and underscores`}}},
	{"status interval", streams(kv{"source": `{dsn: "postgres://db/x", status_interval: 0s}`}), []Problem{{"streams[0].source.status_interval",
		"0s is out of range: use a duration above 0, e.g. 10s"}}},
	{"wal warn bytes", streams(kv{"source": `{dsn: "postgres://db/x", wal_warn_bytes: -1}`}), []Problem{{"streams[0].source.wal_warn_bytes",
		"-1 is out of range: use 0 (never warn) or more"}}},
	{"read timeouts below", streams(kv{"source": `{dsn: "postgres://db/x", read_timeouts: {statement: 99ms, lock: 9ms, idle_in_transaction: 999ms}}`}), []Problem{
		{"streams[0].source.read_timeouts.statement", "99ms is out of range: use 100ms to 24h"},
		{"streams[0].source.read_timeouts.lock", "9ms is out of range: use 10ms to 1h"},
		{"streams[0].source.read_timeouts.idle_in_transaction", "999ms is out of range: use 1s to 24h"}}},
	{"read timeouts above", streams(kv{"source": `{dsn: "postgres://db/x", read_timeouts: {statement: 24h1s, lock: 61m, idle_in_transaction: 25h}}`}), []Problem{
		{"streams[0].source.read_timeouts.statement", "24h0m1s is out of range: use 100ms to 24h"},
		{"streams[0].source.read_timeouts.lock", "1h1m is out of range: use 10ms to 1h"},
		{"streams[0].source.read_timeouts.idle_in_transaction", "25h is out of range: use 1s to 24h"}}},
	{"read timeouts not durations", streams(kv{"source": `{dsn: "postgres://db/x", read_timeouts: {statement: 5}}`}), []Problem{
		{"streams[0].source.read_timeouts.statement", `"5" is not a duration: use a number with a unit, e.g. 500ms, 10s or 1m`}}},
	{"lag warn", streams(kv{"lag_warn": "-1s"}), []Problem{{"streams[0].lag_warn",
		"-1s is out of range: use 0 (never warn) or a duration above 0, e.g. 5m"}}},
	{"shared slot", streams(kv{"source": `{dsn: "postgres://db/x", slot: s}`},
		kv{"name": "other", "source": `{dsn: "postgres://db/x", slot: s}`},
		kv{"name": "elsewhere", "source": `{dsn: "postgres://db/y", slot: s}`}),
		[]Problem{{"streams[1].source.slot", `"s" is also the slot of streams[0] on the same source: give each stream its own`}}},
	{"shared publication", streams(kv{"source": `{dsn: "postgres://db/x", publication: p}`},
		kv{"name": "other", "source": `{dsn: "postgres://db/x", publication: p}`}),
		[]Problem{{"streams[1].source.publication", `"p" is also the publication of streams[0] on the same source: give each stream its own`}}},

	// Destination.
	{"destination type missing", streams(kv{"destination": "{path: x.db}"}), []Problem{{"streams[0].destination.type",
		"missing: use files, kafka, nats, postgres or sqlite"}}},
	{"destination type", streams(kv{"destination": "{type: mysql}"}), []Problem{{"streams[0].destination.type",
		`"mysql" is not supported: use files, kafka, nats, postgres or sqlite`}}},
	{"postgres destination", streams(kv{"destination": "{type: postgres, path: x.db}"}), []Problem{
		{"streams[0].destination.dsn", "missing: give the destination database as a postgres:// URL"},
		{"streams[0].destination.path", "only files and sqlite destinations have a path: remove it, or use dsn"}}},
	{"postgres destination dsn", streams(kv{"destination": "{type: postgres, dsn: 'mysql://u:secret@h'}"}), []Problem{
		{"streams[0].destination.dsn", "not a postgres:// URL: " + postgresURLFix}}},
	{"postgres destination port", streams(kv{"destination": "{type: postgres, dsn: 'postgres://u:secret@h:99999999999999999999/x'}"}), []Problem{
		{"streams[0].destination.dsn", `port "99999999999999999999" is out of range: use a port from 1 to 65535, or leave it out for 5432`}}},
	{"sqlite destination", streams(kv{"destination": "{type: sqlite, dsn: 'postgres://u:secret@db/x'}"}), []Problem{
		{"streams[0].destination.path", "missing: give the database file, e.g. path: replica.db"},
		{"streams[0].destination.dsn", "only postgres destinations have a dsn: remove it, or use path"}}},
	{"nats destination", streams(kv{"destination": "{type: nats, path: x.db}"}), []Problem{
		{"streams[0].destination.url", "missing: give the NATS server's URL, e.g. url: nats://nats.example.com:4222"},
		{"streams[0].destination.path", "only files and sqlite destinations have a path: remove it, or use url, stream, subject_prefix, credentials, tls_ca, tls_cert, tls_key or max_message_bytes"}}},
	{"nats destination keys", streams(kv{"destination": "{type: nats, url: 'http://u:secret@h:4222', stream: a.b, subject_prefix: 'x.*', tls_key: k.pem, max_message_bytes: 10}"}), []Problem{
		{"streams[0].destination.url", `"http://u:xxxxx@h:4222" is not a NATS URL: use the scheme nats://, tls://, ws:// or wss://`},
		{"streams[0].destination.stream", `"a.b" is not a JetStream stream name: use letters, digits, _ and -`},
		{"streams[0].destination.subject_prefix", `"x.*" is not a subject prefix: use dot-separated tokens without spaces or wildcards, e.g. cdc.shop`},
		{"streams[0].destination.tls_key", "a client key needs its certificate: add tls_cert"},
		{"streams[0].destination.max_message_bytes", "10 is out of range: give a size from 1024 (1 KiB) to 67108864 (64 MiB), at most the server's max_payload"}}},
	{"url on postgres", streams(kv{"destination": "{type: postgres, dsn: 'postgres://db/x', url: 'nats://h'}"}), []Problem{
		{"streams[0].destination.url", "only nats destinations have a url: remove it, or use dsn"}}},
	{"kafka destination", streams(kv{"destination": "{type: kafka, brokers: [kafka1], topic: events, max_message_bytes: 10, sasl_mechanism: gssapi, path: x}"}), []Problem{
		{"streams[0].destination.brokers[0]", `"kafka1" is not host:port: write e.g. kafka1:9092`},
		{"streams[0].destination.topic", `"events" lacks {table}: every table needs a topic of its own, e.g. {stream}.{schema}.{table}`},
		{"streams[0].destination.max_message_bytes", "10 is out of range: give a size from 1024 (1 KiB) to 1073741824 (1 GiB)"},
		{"streams[0].destination.sasl_mechanism", `"gssapi" is not supported: use plain, scram-sha-256 or scram-sha-512`},
		{"streams[0].destination.path", "only files and sqlite destinations have a path: remove it, or use brokers, topic, checkpoint_topic, partitions, max_message_bytes, tls, tls_ca, tls_cert, tls_key, sasl_mechanism, sasl_username or sasl_password"}}},
	{"kafka keys elsewhere", streams(kv{"destination": "{type: sqlite, path: x.db, brokers: ['k:9092'], tls: true}"}), []Problem{
		{"streams[0].destination.brokers", "only kafka destinations have a brokers: remove it, or use path"},
		{"streams[0].destination.tls", "only kafka destinations have a tls: remove it, or use path"}}},

	// Tables.
	{"include missing", streams(kv{"include": ""}), []Problem{{"streams[0].include",
		"missing: list the tables to replicate, e.g. [public.*]"}}},
	{"include empty", streams(kv{"include": "[]"}), []Problem{{"streams[0].include",
		"missing: list the tables to replicate, e.g. [public.*]"}}},
	{"include pattern", streams(kv{"include": "['a.b.c', '']"}), []Problem{
		{"streams[0].include[0]", `"a.b.c" is not a table pattern: more than one unquoted dot: write schema.table, and quote names that contain dots, e.g. "my.schema".orders`},
		{"streams[0].include[1]", "empty pattern: write schema.table, e.g. public.*"}}},
	{"exclude pattern", streams(kv{"exclude": `['"x']`, "backfill": "{exclude: ['a b']}"}), []Problem{
		{"streams[0].exclude[0]", `"\"x" is not a table pattern: unterminated double quote: close the quoted name with "`},
		{"streams[0].backfill.exclude[0]", `"a b" is not a table pattern: unquoted space or control character: put the name in double quotes, e.g. public."order items"`}}},
	{"keys wildcard", streams(kv{"keys": "{public.ev*: [id]}"}), []Problem{{"streams[0].keys.public.ev*",
		"wildcards are not allowed here: name one table, quoting names that contain * or ?"}}},
	{"keys bad table", streams(kv{"keys": "{a.b.c: [id]}"}), []Problem{{"streams[0].keys.a.b.c",
		`"a.b.c" is not a table name: more than one unquoted dot: write schema.table, and quote names that contain dots, e.g. "my.schema".orders`}}},
	{"keys twice", streams(kv{"keys": "{events: [id], public.events: [id]}"}), []Problem{{"streams[0].keys.public.events",
		"the table is listed twice (second time on line 1): keep one"}}},
	{"keys columns", streams(kv{"keys": "{public.a: [], public.b: [id, '', id]}"}), []Problem{
		{"streams[0].keys.public.a", "no columns: list the key columns in key order, e.g. [tenant_id, id]"},
		{"streams[0].keys.public.b[1]", "empty column name"},
		{"streams[0].keys.public.b[2]", `column "id" is listed twice: list each key column once`}}},
	{"keys not included", streams(kv{"keys": "{app.events: [id]}"}), []Problem{{"streams[0].keys.app.events",
		"the stream does not replicate this table: include it, or remove this key"}}},
	{"keys shape", streams(kv{"keys": "[a]"}), []Problem{{"streams[0].keys",
		"expected a mapping of table to key columns, found a list"}}},
	{"keys columns shape", streams(kv{"keys": "{public.a: id}"}), []Problem{{"streams[0].keys.public.a",
		"expected a list of key columns, found a single value"}}},

	// Tuning.
	{"backfill mode", streams(kv{"backfill": "{mode: sometimes}"}), []Problem{{"streams[0].backfill.mode",
		`"sometimes" is not supported: use automatic or manual`}}},
	{"backfill low", streams(kv{"backfill": "{max_concurrent: 0, chunk_size: 0, rows_per_second: -1, window_max_changes: 0, chunk_write_target: -1s, snapshot_max_hold: -1s}"}), []Problem{
		{"streams[0].backfill.max_concurrent", "0 is out of range: use 1 to 64"},
		{"streams[0].backfill.chunk_size", "0 is out of range: use 1 to 1000000"},
		{"streams[0].backfill.rows_per_second", "-1 is out of range: use 0 or more"},
		{"streams[0].backfill.window_max_changes", "0 is out of range: use 1 or more"},
		{"streams[0].backfill.chunk_write_target", "-1s is out of range: use 0 (always chunk_size) or a duration above 0, e.g. 20ms"},
		{"streams[0].backfill.snapshot_max_hold", "-1s is out of range: use 0 (never load in the slot's snapshot) or a duration above 0, e.g. 1h"}}},
	{"backfill high", streams(kv{"backfill": "{max_concurrent: 65, chunk_size: 1000001}"}), []Problem{
		{"streams[0].backfill.max_concurrent", "65 is out of range: use 1 to 64"},
		{"streams[0].backfill.chunk_size", "1000001 is out of range: use 1 to 1000000"}}},
	{"batch", streams(kv{"batch": "{max_changes: 0, max_delay: -1s}"}), []Problem{
		{"streams[0].batch.max_changes", "0 is out of range: use 1 or more"},
		{"streams[0].batch.max_delay", "-1s is out of range: use a duration above 0, e.g. 200ms"}}},
	{"retry initial", streams(kv{"retry": "{initial: 0s}"}), []Problem{{"streams[0].retry.initial",
		"0s is out of range: use a duration above 0, e.g. 1s"}}},
	{"retry max", streams(kv{"retry": "{initial: 2m}"}), []Problem{{"streams[0].retry.max",
		"1m0s is less than retry.initial (2m0s): use at least 2m0s"}}},

	// Conversions.
	{"not a number", streams(kv{"backfill": "{chunk_size: lots}", "source": `{dsn: "postgres://db/x", wal_warn_bytes: 99999999999999999999}`}), []Problem{
		{"streams[0].source.wal_warn_bytes", `"99999999999999999999" is too large: use at most 9223372036854775807`},
		{"streams[0].backfill.chunk_size", `"lots" is not a whole number: use digits, e.g. 10000`}}},
	{"not a duration", streams(kv{"batch": "{max_delay: 5}"}), []Problem{{"streams[0].batch.max_delay",
		`"5" is not a duration: use a number with a unit, e.g. 500ms, 10s or 1m`}}},
	{"not a bool", streams(kv{"include_future_tables": "maybe"}), []Problem{{"streams[0].include_future_tables",
		`"maybe" is not true or false`}}},
	{"not a single value", streams(kv{"name": "[a, b]", "include": "[[public.*]]"}), []Problem{
		{"streams[0].name", "expected a single value, found a list"},
		{"streams[0].include[0]", "expected a single value, found a list"}}},
}

func TestValidationErrors(t *testing.T) {
	checkCases(t, validationCases)
}

// checkCases checks that each case's configuration has exactly its
// problems, none of them showing a secret.
func checkCases(t *testing.T, cases []problemCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml), nil)
			if cfg != nil {
				t.Errorf("Parse returned a Config with its error")
			}
			wantProblems(t, err, tc.want...)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// shapeCases cover problems of the file's shape.
var shapeCases = []problemCase{
	{"unknown key with suggestion", `
streams:
  - name: shop
    source:
      dsn: postgres://db/shop
      sloot: x
    destination: {type: sqlite, path: replica.db}
    include: [public.*]
`, []Problem{{"streams[0].source.sloot", "unknown key (line 6): did you mean slot?"}}},
	{"unknown keys", `
metdata: x
log: {colour: true}
` + streams(nil), []Problem{
		{"metdata", "unknown key (line 2): did you mean metadata?"},
		{"log.colour", "unknown key (line 3): use one of level, format"}}},
	{"unknown key in a later stream", streams(nil, kv{"name": "two", "chunk_size": "5"}), []Problem{
		{"streams[1].chunk_size", "unknown key (line 1): use one of name, source, destination, include, exclude, " +
			"include_future_tables, keys, backfill, batch, retry, lag_warn, discovery_interval, node"}}},
	{"key twice", `
streams:
  - name: first
    name: shop
    source: {dsn: "postgres://db/shop"}
    destination: {type: sqlite, path: replica.db}
    include: [public.*]
`, []Problem{{"streams[0].name", "set twice (lines 3 and 4): keep one"}}},
	{"wrong kinds", `
api: [a]
streams:
  - name: shop
    source: postgres://u:secret@db/shop
    destination: {type: sqlite, path: replica.db}
    include: public.*
`, []Problem{
		{"api", "expected a mapping of keys to values, found a list"},
		{"streams[0].source", "expected a mapping of keys to values, found a single value"},
		{"streams[0].include", "expected a list, found a single value"}}},
	{"bad element keeps indexes", "streams:\n  - x\n  - " + stream(kv{"name": "Bad"}), []Problem{
		{"streams[0]", "expected a mapping of keys to values, found a single value"},
		{"streams[1].name", `"Bad" is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter`}}},
	{"null element keeps indexes", "streams:\n  -\n  - " + stream(kv{"name": "Bad"}), []Problem{
		{"streams[0].name", "missing: name the stream with lower-case letters, digits and underscores, e.g. shop"},
		{"streams[0].source.dsn", "missing: give the source database as a postgres:// URL"},
		{"streams[0].destination.type", "missing: use files, kafka, nats, postgres or sqlite"},
		{"streams[0].include", "missing: list the tables to replicate, e.g. [public.*]"},
		{"streams[1].name", `"Bad" is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter`}}},
	{"null token keeps indexes", "api:\n  tokens:\n    -\n    - {name: ci, token: a, role: viewer}\n    - {name: ci, token: b, role: viewer}\n" + one, []Problem{
		{"api.tokens[0].name", "missing: name the token after its user, e.g. ci"},
		{"api.tokens[0].token", "missing: set the token, e.g. token: ${CI_TOKEN}"},
		{"api.tokens[0].role", roleMissing},
		{"api.tokens[2].name", `"ci" is used twice (also api.tokens[1]): token names must be unique`}}},
	{"dsn as a key", "streams:\n  - name: shop\n    source: {postgres://u:secret@db.example.com/shop}\n", []Problem{
		{"streams[0].source.postgres://u:xxxxx@db.example.com/shop", "unknown key (line 3): use one of type, dsn, publication, publication_mode, slot, status_interval, wal_warn_bytes, read_timeouts, server_id"},
		{"streams[0].source.dsn", "missing: give the source database as a postgres:// URL"},
		{"streams[0].destination.type", "missing: use files, kafka, nats, postgres or sqlite"},
		{"streams[0].include", "missing: list the tables to replicate, e.g. [public.*]"}}},
	{"dsn as a pattern", streams(kv{"include": "['postgres://u:secret@db.example.com/shop']"}), []Problem{
		{"streams[0].include[0]", `"postgres://u:xxxxx@db.example.com/shop" is not a table pattern: more than one unquoted dot: write schema.table, and quote names that contain dots, e.g. "my.schema".orders`}}},
	{"syntax", "streams: [\n", []Problem{{"line 1", "did not find expected node content: fix the YAML syntax"}}},
	{"two documents", streams(nil) + "---\nlog: {}\n", []Problem{
		{"", "the file holds more than one YAML document: keep only the first (remove ---)"}}},
	{"not a mapping", "- a\n", []Problem{
		{"line 1", "expected a mapping of keys to values, found a list"},
		{"streams", "no streams and no tasks: add at least one stream or task"}}},
}

func TestShapeErrors(t *testing.T) {
	for _, tc := range shapeCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), nil)
			wantProblems(t, err, tc.want...)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

func TestValidateConfigLiteral(t *testing.T) {
	cfg := mustParse(t, minimalYAML, nil)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a parsed config does not validate: %v", err)
	}
	s := &cfg.Streams[0]
	s.Source.Type, s.Source.Publication, s.Source.Slot = "", "", ""
	s.Backfill.Mode = ""
	s.Include = append(s.Include, Pattern{})
	cfg.API.Listen, cfg.Metadata = "", ""
	wantProblems(t, cfg.Validate(),
		Problem{"metadata", "missing: use e.g. sqlite://tidemark.db"},
		Problem{"api.listen", "missing: use host:port, e.g. 127.0.0.1:7420"},
		Problem{"streams[0].source.type", "missing: use postgres or mysql"},
		Problem{"streams[0].source.publication", "missing: leave it out to use tidemark_<stream name>"},
		Problem{"streams[0].source.slot", `"" is not a valid slot name: use 1 to 63 lower-case letters, digits and underscores`},
		Problem{"streams[0].include[1]", "empty pattern: write schema.table, e.g. public.*"},
		Problem{"streams[0].backfill.mode", "missing: use automatic or manual"},
	)
}

// Ports at both bounds, in every place a postgres:// URL names one.
func TestDSNPortBounds(t *testing.T) {
	for _, c := range []struct {
		dsn, bad string
	}{
		{"postgres://db/x", ""},
		{"postgres://db:/x", ""},
		{"postgres://db:1/x", ""},
		{"postgres://db:65535/x", ""},
		{"postgres://db:0/x", "0"},
		{"postgres://db:65536/x", "65536"},
		{"postgres://u:p%40ss:w@db:5432/x", ""},
		{"postgres://u:pw@[::1]:65535,[fe80::1]/x", ""},
		{"postgres://u:pw@[::1]:65536/x", "65536"},
		{"postgres://a:5432,b:99999/x", "99999"},
		{"postgres://a?port=65535", ""},
		{"postgres://a?port=0", "0"},
		{"postgres://a?host=b&port=5432,1e3", "1e3"},
		{"postgres://a/x?port=%39%39%39%39%39", "99999"},
		{"postgres://a:-5432/x", "-5432"},
	} {
		if got := badPort(c.dsn); got != c.bad {
			t.Errorf("badPort(%s) = %q, want %q", c.dsn, got, c.bad)
		}
	}
}
