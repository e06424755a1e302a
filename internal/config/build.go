package config

// Stage 2, second half: from the raw shape to a Config. Every value is
// expanded, converted to its Go type and, when absent or empty, replaced by
// its default. A value that does not convert is reported and left at its
// default, so that validation does not complain about it a second time.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/change"
	"go.yaml.in/yaml/v3"
)

// Defaults.
const (
	defaultMetadata         = "sqlite://tidemark.db"
	defaultListen           = "127.0.0.1:7420"
	defaultNamePrefix       = "tidemark_" // of publication and slot names
	defaultSourceType       = TypePostgres
	defaultStatusInterval   = 10 * time.Second
	defaultWALWarnBytes     = 1 << 30
	defaultStatementTimeout = 5 * time.Minute
	defaultLockTimeout      = 10 * time.Second
	defaultIdleInTxTimeout  = time.Minute
	defaultMaxConcurrent    = 2
	defaultChunkSize        = 10000
	defaultChunkWriteTarget = 20 * time.Millisecond
	defaultSnapshotMaxHold  = time.Hour
	defaultWindowMaxChanges = 100000
	defaultBatchMaxChanges  = 10000
	defaultBatchMaxDelay    = 200 * time.Millisecond
	defaultRetryInitial     = time.Second
	defaultRetryMax         = time.Minute
	defaultLagWarn          = 5 * time.Minute
	defaultDiscovery        = 10 * time.Second

	defaultTimezone           = "UTC"
	defaultOutputLookbackDays = 15
	defaultConfirmAbove       = 10000
	defaultLogLimitBytes      = 1 << 20
	defaultConcurrency        = 4 // of a resource group
	defaultTaskRetryBackoff   = 10 * time.Second
	defaultOnChangeSettle     = 10 * time.Minute
	defaultOnChangeMaxPerDay  = 3
)

type builder struct {
	env      func(string) (string, bool)
	problems []Problem
}

func (b *builder) add(path, format string, args ...any) {
	b.problems = append(b.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// text returns a value expanded; ok is false when it is absent, empty or
// could not be expanded.
func (b *builder) text(path string, s scalar) (v string, ok bool) {
	if s.Bad != "" {
		b.add(path, "expected a single value, found %s", s.Bad)
		return "", false
	}
	if !s.Set {
		return "", false
	}
	if s.Env != "" {
		return s.Value, s.Value != ""
	}
	v, problems := expand(s.Value, b.env)
	for _, p := range problems {
		b.add(path, "%s", p)
	}
	return v, v != "" && problems == nil
}

func (b *builder) str(path string, s scalar, def string) string {
	if v, ok := b.text(path, s); ok {
		return v
	}
	return def
}

func (b *builder) integer(path string, s scalar, def int64) int64 {
	v, ok := b.text(path, s)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 0)
	switch {
	case errors.Is(err, strconv.ErrRange):
		b.add(path, "%q is too large: use at most %d", shown(v), math.MaxInt)
		return def
	case err != nil:
		b.add(path, "%q is not a whole number: use digits, e.g. %d", shown(v), def)
		return def
	}
	return n
}

func (b *builder) duration(path string, s scalar, def time.Duration) time.Duration {
	v, ok := b.text(path, s)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.add(path, "%q is not a duration: use a number with a unit, e.g. 500ms, 10s or 1m", shown(v))
		return def
	}
	return d
}

// age reads a duration that may count days: 1d, 36h, 90m; 0 when absent.
func (b *builder) age(path string, s scalar) time.Duration {
	v, ok := b.text(path, s)
	if !ok {
		return 0
	}
	if days, found := strings.CutSuffix(v, "d"); found {
		if n, err := strconv.ParseUint(days, 10, 16); err == nil {
			return time.Duration(n) * 24 * time.Hour
		}
	} else if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	b.add(path, "%q is not an age: use whole days or a duration, e.g. 1d, 36h or 90m", shown(v))
	return 0
}

func (b *builder) boolean(path string, s scalar, def bool) bool {
	v, ok := b.text(path, s)
	if !ok {
		return def
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	}
	b.add(path, "%q is not true or false", shown(v))
	return def
}

// shown prepares a value for an error message: a long one is cut, and
// one that looks like a DSN has its passwords redacted (a DSN may end up
// in the wrong key).
func shown(s string) string {
	s = redactLike(s)
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// redactLike redacts s if it looks like a DSN.
func redactLike(s string) string {
	if strings.Contains(s, "://") || strings.Contains(strings.ToLower(s), "password") {
		return Redact(s)
	}
	return s
}

func (b *builder) patterns(path string, ss []scalar) []Pattern {
	var ps []Pattern
	for i, s := range ss {
		p := fmt.Sprintf("%s[%d]", path, i)
		before := len(b.problems)
		v, _ := b.text(p, s)
		if len(b.problems) > before {
			continue
		}
		pat, reason := parsePattern(v)
		switch {
		case reason == "":
			ps = append(ps, pat)
		case v == "":
			b.add(p, "%s", reason)
		default:
			b.add(p, "%q is not a table pattern: %s", shown(v), reason)
		}
	}
	return ps
}

func (b *builder) keys(path string, raw rawKeys) map[change.TableID][]string {
	if raw.Bad != "" {
		b.add(path, "expected a mapping of table to key columns, found %s", raw.Bad)
	}
	if len(raw.Entries) == 0 {
		return nil
	}
	keys := make(map[change.TableID][]string, len(raw.Entries))
	for _, e := range raw.Entries {
		p := path + "." + redactLike(e.Table)
		if e.Bad != "" {
			b.add(p, "expected a list of key columns, found %s", e.Bad)
			continue
		}
		pat, reason := parsePattern(e.Table)
		t, ok := pat.Table()
		switch {
		case reason != "":
			b.add(p, "%q is not a table name: %s", shown(e.Table), reason)
			continue
		case !ok:
			b.add(p, "wildcards are not allowed here: name one table, quoting names that contain * or ?")
			continue
		}
		if _, dup := keys[t]; dup {
			b.add(p, "the table is listed twice (second time on line %d): keep one", e.Line)
			continue
		}
		cols := make([]string, len(e.Columns))
		for i, c := range e.Columns {
			cols[i], _ = b.text(fmt.Sprintf("%s[%d]", p, i), c)
		}
		keys[t] = cols
	}
	return keys
}

func (b *builder) config(r *rawConfig) *Config {
	c := &Config{
		Metadata: b.str("metadata", r.Metadata, defaultMetadata),
		API:      API{Listen: b.str("api.listen", r.API.Listen, defaultListen)},
		Log: Log{
			Level:  b.str("log.level", r.Log.Level, LevelInfo),
			Format: b.str("log.format", r.Log.Format, FormatAuto),
		},
	}
	for i, t := range r.API.Tokens {
		p := fmt.Sprintf("api.tokens[%d]", i)
		c.API.Tokens = append(c.API.Tokens, Token{
			Name:  b.str(p+".name", t.Name, ""),
			Token: b.str(p+".token", t.Token, ""),
			Role:  Role(b.str(p+".role", t.Role, "")),
		})
	}
	for i, h := range r.API.AllowedHosts {
		v, _ := b.text(fmt.Sprintf("api.allowed_hosts[%d]", i), h)
		c.API.AllowedHosts = append(c.API.AllowedHosts, v)
	}
	for i := range r.Streams {
		st := b.stream(fmt.Sprintf("streams[%d]", i), &r.Streams[i])
		if k, ok := sourceKind(st.Source.Type); ok && k.Defaults != nil {
			k.Defaults(&st)
		}
		c.Streams = append(c.Streams, st)
	}
	b.batch(c, r)
	c.Cluster = b.cluster(r.Cluster, c.API.Listen)
	return c
}

// cluster builds the cluster section; nil when the file has none.
func (b *builder) cluster(r *rawCluster, listen string) *Cluster {
	if r == nil {
		return nil
	}
	host, _ := os.Hostname()
	return &Cluster{
		Node:      b.str("cluster.node", r.Node, ""),
		Host:      b.str("cluster.host", r.Host, cmp.Or(host, "unknown")),
		Lease:     b.duration("cluster.lease", r.Lease, defaultClusterLease),
		Advertise: b.str("cluster.advertise", r.Advertise, "http://"+listen),
	}
}

func (b *builder) readTimeouts(p string, r *rawReadTimeouts) ReadTimeouts {
	return ReadTimeouts{
		Statement:         b.duration(p+".statement", r.Statement, defaultStatementTimeout),
		Lock:              b.duration(p+".lock", r.Lock, defaultLockTimeout),
		IdleInTransaction: b.duration(p+".idle_in_transaction", r.IdleInTransaction, defaultIdleInTxTimeout),
	}
}

func (b *builder) stream(p string, r *rawStream) Stream {
	name := b.str(p+".name", r.Name, "")
	b.sourceKeys(p+".source", &r.Source)
	bf := &r.Backfill
	st := Stream{
		Name: name,
		Source: Source{
			Type:            b.str(p+".source.type", r.Source.Type, defaultSourceType),
			DSN:             b.str(p+".source.dsn", r.Source.DSN, ""),
			Publication:     b.str(p+".source.publication", r.Source.Publication, defaultNamePrefix+name),
			PublicationMode: b.str(p+".source.publication_mode", r.Source.PublicationMode, ""),
			Slot:            b.str(p+".source.slot", r.Source.Slot, defaultNamePrefix+name),
			StatusInterval:  b.duration(p+".source.status_interval", r.Source.StatusInterval, defaultStatusInterval),
			WALWarnBytes:    b.integer(p+".source.wal_warn_bytes", r.Source.WALWarnBytes, defaultWALWarnBytes),
			ReadTimeouts:    b.readTimeouts(p+".source.read_timeouts", &r.Source.ReadTimeouts),
			ServerID:        b.serverID(p+".source.server_id", r.Source.ServerID),
		},
		Destination: Destination{
			Type:            b.str(p+".destination.type", r.Destination.Type, ""),
			DSN:             b.str(p+".destination.dsn", r.Destination.DSN, ""),
			Path:            b.str(p+".destination.path", r.Destination.Path, ""),
			Format:          b.str(p+".destination.format", r.Destination.Format, ""),
			MaxFileBytes:    b.integer(p+".destination.max_file_bytes", r.Destination.MaxFileBytes, 0),
			URL:             b.str(p+".destination.url", r.Destination.URL, ""),
			NATSStream:      b.str(p+".destination.stream", r.Destination.NATSStream, ""),
			SubjectPrefix:   b.str(p+".destination.subject_prefix", r.Destination.SubjectPrefix, ""),
			Credentials:     b.str(p+".destination.credentials", r.Destination.Credentials, ""),
			TLSCA:           b.str(p+".destination.tls_ca", r.Destination.TLSCA, ""),
			TLSCert:         b.str(p+".destination.tls_cert", r.Destination.TLSCert, ""),
			TLSKey:          b.str(p+".destination.tls_key", r.Destination.TLSKey, ""),
			MaxMessageBytes: b.integer(p+".destination.max_message_bytes", r.Destination.MaxMessageBytes, 0),
			Kafka:           b.kafka(p+".destination", &r.Destination),
		},
		Include:             b.patterns(p+".include", r.Include),
		Exclude:             b.patterns(p+".exclude", r.Exclude),
		IncludeFutureTables: b.boolean(p+".include_future_tables", r.IncludeFutureTables, true),
		Keys:                b.keys(p+".keys", r.Keys),
		Backfill: Backfill{
			Mode:             b.str(p+".backfill.mode", bf.Mode, BackfillAutomatic),
			Exclude:          b.patterns(p+".backfill.exclude", bf.Exclude),
			MaxConcurrent:    int(b.integer(p+".backfill.max_concurrent", bf.MaxConcurrent, defaultMaxConcurrent)),
			ChunkSize:        int(b.integer(p+".backfill.chunk_size", bf.ChunkSize, defaultChunkSize)),
			RowsPerSecond:    int(b.integer(p+".backfill.rows_per_second", bf.RowsPerSecond, 0)),
			WindowMaxChanges: int(b.integer(p+".backfill.window_max_changes", bf.WindowMaxChanges, defaultWindowMaxChanges)),
			ChunkWriteTarget: b.duration(p+".backfill.chunk_write_target", bf.ChunkWriteTarget, defaultChunkWriteTarget),
			SnapshotMaxHold:  b.duration(p+".backfill.snapshot_max_hold", bf.SnapshotMaxHold, defaultSnapshotMaxHold),
			Verify:           b.boolean(p+".backfill.verify", bf.Verify, true),
		},
		Batch: Batch{
			MaxChanges: int(b.integer(p+".batch.max_changes", r.Batch.MaxChanges, defaultBatchMaxChanges)),
			MaxDelay:   b.duration(p+".batch.max_delay", r.Batch.MaxDelay, defaultBatchMaxDelay),
		},
		Retry: Retry{
			Initial: b.duration(p+".retry.initial", r.Retry.Initial, defaultRetryInitial),
			Max:     b.duration(p+".retry.max", r.Retry.Max, defaultRetryMax),
		},
		LagWarn:           b.duration(p+".lag_warn", r.LagWarn, defaultLagWarn),
		Node:              b.str(p+".node", r.Node, ""),
		DiscoveryInterval: b.duration(p+".discovery_interval", r.DiscoveryInterval, defaultDiscovery),
	}
	// A destination that cannot be read back does not verify unless asked
	// (and validation refuses the asking).
	if k, ok := destinationKind(st.Destination.Type); ok && !k.Verify && strings.TrimSpace(bf.Verify.Value) == "" {
		st.Backfill.Verify = false
	}
	return st
}

// literal returns a value as written, without ${} expansion: task
// commands, SQL and parameters hold scheduling expressions such as
// ${bizdate}, rendered for each instance.
func (b *builder) literal(path string, s scalar) string {
	if s.Bad != "" {
		b.add(path, "expected a single value, found %s", s.Bad)
	}
	return s.Value
}

// location loads a time zone; ok is false when the value is absent or does
// not load.
func (b *builder) location(path string, s scalar) (loc *time.Location, name string, ok bool) {
	name, ok = b.text(path, s)
	if !ok {
		return nil, "", false
	}
	// "Local" is the host's zone: business dates would move with the
	// machine tidemark runs on.
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		b.add(path, "unknown time zone %q: use an IANA time zone name, e.g. Europe/Paris or UTC", shown(name))
		return nil, "", false
	}
	return loc, name, true
}

func (b *builder) batch(c *Config, r *rawConfig) {
	bs := &r.Batch
	c.Batch = BatchSettings{
		Timezone:           time.UTC,
		TimezoneName:       defaultTimezone,
		OutputLookbackDays: int(b.integer("batch.output_lookback_days", bs.OutputLookbackDays, defaultOutputLookbackDays)),
		ConfirmAbove:       int(b.integer("batch.confirm_above", bs.ConfirmAbove, defaultConfirmAbove)),
		LogLimitBytes:      int(b.integer("batch.log_limit_bytes", bs.LogLimitBytes, defaultLogLimitBytes)),
	}
	if loc, name, ok := b.location("batch.timezone", bs.Timezone); ok {
		c.Batch.Timezone, c.Batch.TimezoneName = loc, name
	}
	hasDefault := false
	for i, g := range r.ResourceGroups {
		p := fmt.Sprintf("resource_groups[%d]", i)
		rg := ResourceGroup{
			Name:        b.str(p+".name", g.Name, ""),
			Concurrency: int(b.integer(p+".concurrency", g.Concurrency, defaultConcurrency)),
		}
		hasDefault = hasDefault || rg.Name == DefaultResourceGroup
		c.ResourceGroups = append(c.ResourceGroups, rg)
	}
	if !hasDefault {
		// Last, so that the indexes of the declared groups are the file's.
		c.ResourceGroups = append(c.ResourceGroups, ResourceGroup{Name: DefaultResourceGroup, Concurrency: defaultConcurrency})
	}
	for i, conn := range r.Connections {
		p := fmt.Sprintf("connections[%d]", i)
		c.Connections = append(c.Connections, Connection{
			Name: b.str(p+".name", conn.Name, ""),
			Type: b.str(p+".type", conn.Type, ""),
			DSN:  b.str(p+".dsn", conn.DSN, ""),
			Path: b.str(p+".path", conn.Path, ""),
		})
	}
	for i := range r.Tasks {
		c.Tasks = append(c.Tasks, b.task(fmt.Sprintf("tasks[%d]", i), &r.Tasks[i], c.Batch.Timezone))
	}
	gatherDateColumns(c)
}

// gatherDateColumns gives each stream the date columns its tables' readers
// name, each column once, and the late data rules of the readers that ask
// for them and act on changes (the shortest age per column, with its
// read's time zone).
func gatherDateColumns(c *Config) {
	for _, t := range c.Tasks {
		for _, r := range t.Reads {
			s, ok := c.Stream(r.Stream)
			if !ok || r.DateColumn == "" {
				continue
			}
			if s.DateColumns == nil {
				s.DateColumns = map[change.TableID][]string{}
			}
			if !slices.Contains(s.DateColumns[r.Table], r.DateColumn) {
				s.DateColumns[r.Table] = append(s.DateColumns[r.Table], r.DateColumn)
			}
			if r.LateAfter <= 0 || t.OnChange == nil || t.OnChange.Action == dag.OnChangeOff {
				continue // late data nobody acts on would wait forever
			}
			if s.LateData == nil {
				s.LateData = map[change.TableID][]LateRule{}
			}
			rules := s.LateData[r.Table]
			i := slices.IndexFunc(rules, func(l LateRule) bool { return l.Column == r.DateColumn })
			switch {
			case i < 0:
				s.LateData[r.Table] = append(rules, LateRule{Column: r.DateColumn, After: r.LateAfter, Location: r.Location})
			case r.LateAfter < rules[i].After:
				rules[i] = LateRule{Column: r.DateColumn, After: r.LateAfter, Location: r.Location}
			}
		}
	}
}

// task builds a task. Its upstream IDs are resolved as written: a name
// without a dot is in the task's project; whether they exist is for
// validation to tell.
func (b *builder) task(p string, r *rawTask, loc *time.Location) dag.Task {
	t := dag.Task{
		Name:           b.str(p+".name", r.Name, ""),
		Project:        b.str(p+".project", r.Project, DefaultProject),
		Owner:          b.str(p+".owner", r.Owner, ""),
		Output:         b.str(p+".output", r.Output, ""),
		Type:           b.str(p+".type", r.Type, ""),
		Command:        b.literal(p+".command", r.Command),
		Connection:     b.str(p+".connection", r.Connection, ""),
		SQL:            b.literal(p+".sql", r.SQL),
		SelfDependent:  b.boolean(p+".self_dependent", r.SelfDependent, false),
		Params:         b.params(p+".params", r.Params),
		Outputs:        b.params(p+".outputs", r.Outputs),
		Paused:         b.boolean(p+".paused", r.Paused, false),
		DryRun:         b.boolean(p+".dry_run", r.DryRun, false),
		SingleInstance: b.boolean(p+".single_instance", r.SingleInstance, false),
		Retries:        int(b.integer(p+".retries", r.Retries, 0)),
		RetryBackoff:   b.duration(p+".retry_backoff", r.RetryBackoff, defaultTaskRetryBackoff),
		Timeout:        b.duration(p+".timeout", r.Timeout, 0),
		ResourceGroup:  b.str(p+".resource_group", r.ResourceGroup, DefaultResourceGroup),
	}
	t.ID = t.Project + "." + t.Name
	for i, s := range r.DependsOn {
		dep, _ := b.text(fmt.Sprintf("%s.depends_on[%d]", p, i), s)
		if dep != "" && !strings.Contains(dep, ".") {
			dep = t.Project + "." + dep
		}
		t.Upstream = append(t.Upstream, dep) // "" too, so that indexes stay the file's
	}
	for i, s := range r.Env {
		name, _ := b.text(fmt.Sprintf("%s.env[%d]", p, i), s)
		t.Env = append(t.Env, name) // "" too, so that indexes stay the file's
	}
	if tz, _, ok := b.location(p+".timezone", r.Timezone); ok {
		loc = tz
	}
	if spec, ok := b.text(p+".schedule", r.Schedule); ok {
		sched, err := calendar.Parse(spec, loc)
		if err != nil {
			b.add(p+".schedule", "%v", err) // it names the spec and what was expected
		}
		t.Schedule = sched
	}
	for i := range r.Reads {
		t.Reads = append(t.Reads, b.read(fmt.Sprintf("%s.reads[%d]", p, i), &r.Reads[i], loc))
	}
	if oc := &r.OnChange; oc.Action.Set || oc.Settle.Set || oc.MaxPerDay.Set || oc.Backfill.Kind != 0 ||
		oc.Action.Bad != "" || oc.Settle.Bad != "" || oc.MaxPerDay.Bad != "" {
		t.OnChange = b.onChange(p+".on_change", oc)
	}
	return t
}

// read builds one of a task's reads; its time zone is the task's unless
// it gives one.
func (b *builder) read(p string, r *rawRead, loc *time.Location) dag.Read {
	rd := dag.Read{
		Stream:     b.str(p+".stream", r.Stream, ""),
		Object:     b.str(p+".object", r.Object, ""),
		DateColumn: b.str(p+".date_column", r.DateColumn, ""),
		Location:   loc,
	}
	if tz, _, ok := b.location(p+".timezone", r.Timezone); ok {
		rd.Location = tz
	}
	rd.LateAfter = b.age(p+".late_after", r.LateAfter)
	if pat, err := ParsePattern(rd.Object); err == nil {
		rd.Table, _ = pat.Table() // validation reports a pattern with wildcards
	}
	return rd
}

// params builds a params or outputs mapping in file order. The values are
// literal, like commands; a name listed twice is reported and dropped.
func (b *builder) params(path string, raw rawParams) []dag.Param {
	if raw.Bad != "" {
		b.add(path, "expected a mapping of names to values, found %s", raw.Bad)
	}
	var ps []dag.Param
	seen := map[string]bool{}
	for _, e := range raw.Entries {
		p := path + "." + redactLike(e.Name)
		switch {
		case e.Bad != "":
			b.add(p, "%s", e.Bad)
			continue
		case seen[e.Name]:
			b.add(p, "listed twice (second time on line %d): keep one", e.Line)
			continue
		}
		seen[e.Name] = true
		ps = append(ps, dag.Param{Name: e.Name, Value: b.literal(p, e.Value)})
	}
	return ps
}

// serverID reads a MySQL source's replica server id: 1 to 4294967295, or
// unset (0) for one derived from the stream's name.
func (b *builder) serverID(path string, s scalar) uint32 {
	v, ok := b.text(path, s)
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(strings.ReplaceAll(v, "_", ""), 10, 32)
	if err != nil || n == 0 {
		b.add(path, "%q is not a server id: use a whole number from 1 to 4294967295 that no other replica of the server uses, or leave it out to derive one from the stream's name", shown(v))
		return 0
	}
	return uint32(n)
}

// kafka builds the Kafka destination's own keys.
func (b *builder) kafka(p string, r *rawDestination) Kafka {
	k := Kafka{
		Topic:           b.str(p+".topic", r.Topic, ""),
		CheckpointTopic: b.str(p+".checkpoint_topic", r.CheckpointTopic, ""),
		Partitions:      b.integer(p+".partitions", r.Partitions, 0),
		TLS:             b.boolean(p+".tls", r.TLS, false),
		SASLMechanism:   b.str(p+".sasl_mechanism", r.SASLMechanism, ""),
		SASLUsername:    b.str(p+".sasl_username", r.SASLUsername, ""),
		SASLPassword:    b.str(p+".sasl_password", r.SASLPassword, ""),
	}
	for i, s := range r.Brokers {
		if v, ok := b.text(fmt.Sprintf("%s.brokers[%d]", p, i), s); ok {
			k.Brokers = append(k.Brokers, v)
		}
	}
	return k
}

// onChange builds a task's on_change policy; its backfill options decode
// as the API's JSON request does, unknown keys refused.
func (b *builder) onChange(p string, r *rawOnChange) *dag.OnChange {
	oc := &dag.OnChange{
		Action:    b.str(p+".action", r.Action, dag.OnChangeOff),
		Settle:    b.duration(p+".settle", r.Settle, defaultOnChangeSettle),
		MaxPerDay: int(b.integer(p+".max_per_day", r.MaxPerDay, defaultOnChangeMaxPerDay)),
	}
	if r.Backfill.Kind == 0 {
		return oc
	}
	v, err := jsonValue(&r.Backfill)
	if err != nil {
		b.add(p+".backfill", "%v", err)
		return oc
	}
	if _, ok := v.(map[string]any); !ok {
		b.add(p+".backfill", "expected a mapping of batch backfill options, e.g. {scope: {mode: list, downstream: -1}}")
		return oc
	}
	raw, err := json.Marshal(v)
	if err != nil {
		b.add(p+".backfill", "%v", err)
		return oc
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var req plan.Request
	if err := dec.Decode(&req); err != nil {
		b.add(p+".backfill", "%s: use the options of a batch backfill request (docs/batch-planner.md)", strings.TrimPrefix(err.Error(), "json: "))
		return oc
	}
	for _, f := range []struct {
		key string
		set bool
	}{{"task", req.Task != ""}, {"name", req.Name != ""}, {"dates", !reflect.ValueOf(req.Dates).IsZero()},
		{"time_range", req.TimeRange != nil}, {"start_at", req.StartAt != nil || req.RunAt != nil}, {"confirm", req.Confirm}} {
		if f.set {
			b.add(p+".backfill."+f.key, "chosen by tidemark (the task and the changed dates): remove it")
		}
	}
	if err := plan.CheckOptions(req); err != nil {
		b.add(p+".backfill", "%v", err)
	}
	oc.Backfill = raw
	return oc
}

// jsonValue is a YAML value as JSON would hold it: a timestamp-looking
// scalar (2026-03-01) stays the text it is, as the API's request reads it.
func jsonValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 1 {
			return jsonValue(n.Content[0])
		}
		return nil, nil
	case yaml.AliasNode:
		return jsonValue(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := jsonValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := jsonValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	}
	switch n.ShortTag() {
	case "!!int", "!!float", "!!bool", "!!null":
		var v any
		err := n.Decode(&v)
		return v, err
	}
	return n.Value, nil
}
