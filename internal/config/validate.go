package config

// Stage 3: validating a Config as a whole.

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the key, e.g. "streams[0].backfill.chunk_size", or the
	// environment variable that set it, or "line N" when only the line is
	// known; it is empty for a problem with the whole file.
	Path string
	// Message says what is wrong and what to do about it.
	Message string
}

func (p Problem) Error() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists every problem Parse, Load or Validate found. Its
// message has one line per problem, as errors.Join would print them.
type ValidationError struct {
	File     string // the file Load read, or empty; prefixes every line
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		if e.File != "" {
			b.WriteString(e.File + ": ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, one error each.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// Upper bounds of the numeric keys: far above any useful value, they keep a
// typo (an extra few zeros) from becoming a limit that never applies or a
// timer that never fires.
const (
	// MaxRowsPerSecond bounds every rows-per-second limit: the stream's
	// and an initiate's.
	MaxRowsPerSecond     = 1_000_000_000
	maxWindowChanges     = 1_000_000_000
	maxBatchChanges      = 10_000_000
	maxWALWarnBytes      = 1 << 50 // 1 PiB
	maxStatusInterval    = time.Hour
	maxBatchDelay        = time.Hour
	maxRetryWait         = 24 * time.Hour
	maxChunkWriteTarget  = time.Minute
	maxSnapshotHold      = 7 * 24 * time.Hour
	maxLagWarn           = 30 * 24 * time.Hour
	maxDiscoveryInterval = 24 * time.Hour
)

const (
	sqliteScheme   = "sqlite://"
	maxNameBytes   = 63 // PostgreSQL's NAMEDATALEN - 1
	unbounded      = math.MaxInt
	postgresURLFix = "write postgres://user:password@host:5432/dbname, percent-encoding special characters (e.g. @ as %40)"
)

var (
	streamNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	slotNameRE   = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
)

// noWork is the problem of a configuration without streams or tasks.
var noWork = Problem{"streams", "no streams and no tasks: add at least one stream or task"}

// Validate checks a configuration, defaults filled in, and returns a
// *ValidationError listing every problem, or nil.
func (c *Config) Validate() error {
	v := &Checker{}
	v.metadata(c.Metadata)
	v.api(&c.API)
	v.oneOf("log.level", c.Log.Level, LevelDebug, LevelInfo, LevelWarn, LevelError)
	v.oneOf("log.format", c.Log.Format, FormatAuto, FormatJSON, FormatText)
	if len(c.Streams) == 0 && len(c.Tasks) == 0 {
		v.problems = append(v.problems, noWork)
	}
	names := map[string]int{}
	nameTaken := make([]bool, len(c.Streams))
	for i := range c.Streams {
		s := &c.Streams[i]
		p := fmt.Sprintf("streams[%d]", i)
		v.stream(p, s)
		if first, dup := names[s.Name]; dup && s.Name != "" {
			v.add(p+".name", "%q is used twice (also streams[%d]): stream names must be unique", shown(s.Name), first)
			nameTaken[i] = true
		} else {
			names[s.Name] = i
		}
	}
	v.sharedSourceNames(c.Streams, nameTaken)
	v.batch(c)
	v.cluster(c)
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

// Checker collects the problems of a configuration; a source or
// destination kind's Validate adds its own with Add.
type Checker struct {
	problems []Problem
}

func (v *Checker) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Add reports a problem at path, the message formatted as by fmt.Sprintf.
// It must never quote a DSN: a password may be in it.
func (v *Checker) Add(path, format string, args ...any) { v.add(path, format, args...) }

// PostgresDSN checks a postgres:// URL, what naming the database in the
// message when it is missing; it never repeats the DSN.
func (v *Checker) PostgresDSN(path, dsn, what string) { v.dsn(path, dsn, what) }

// OneOf reports value unless it is one of options.
func (v *Checker) OneOf(path, value string, options ...string) { v.oneOf(path, value, options...) }

// Port reports the first port of dsn that is not a port number, saying
// that leaving it out means def.
func (v *Checker) Port(path, dsn string, def int) {
	if p := badPort(dsn); p != "" {
		v.add(path, "port %q is out of range: use a port from %d to %d, or leave it out for %d", shown(p), minPort, maxPort, def)
	}
}

func (v *Checker) oneOf(path, value string, options ...string) {
	use := orList(options)
	switch {
	case value == "":
		v.add(path, "missing: use %s", use)
	case !slices.Contains(options, value):
		v.add(path, "%q is not supported: use %s", shown(value), use)
	}
}

func (v *Checker) intRange(path string, n, lo, hi int) {
	switch {
	case n >= lo && n <= hi:
	case hi == unbounded:
		v.add(path, "%d is out of range: use %d or more", n, lo)
	default:
		v.add(path, "%d is out of range: use %d to %d", n, lo, hi)
	}
}

// durationRange checks lo <= d <= hi.
func (v *Checker) durationRange(path string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.add(path, "%s is out of range: use %s to %s", shortDuration(d), shortDuration(lo), shortDuration(hi))
	}
}

// atLeast checks a count whose documented range is lo or more up to a
// sanity bound hi: below lo it asks for lo or more, above hi it names
// the whole range.
func (v *Checker) atLeast(path string, n, lo, hi int64) {
	switch {
	case n < lo:
		v.add(path, "%d is out of range: use %d or more", n, lo)
	case n > hi:
		v.add(path, "%d is out of range: use %d to %d", n, lo, hi)
	}
}

// positive checks a duration above 0 and at most hi.
func (v *Checker) positive(path string, d, hi time.Duration, example string) {
	switch {
	case d <= 0:
		v.add(path, "%s is out of range: use a duration above 0, e.g. %s", d, example)
	case d > hi:
		v.add(path, "%s is out of range: use a duration above 0 and at most %s, e.g. %s", d, shortDuration(hi), example)
	}
}

// nonNegative checks a duration from 0 to hi; use says what to use
// instead of a negative one.
func (v *Checker) nonNegative(path string, d, hi time.Duration, use string) {
	switch {
	case d < 0:
		v.add(path, "%s is out of range: use %s", d, use)
	case d > hi:
		v.add(path, "%s is out of range: use 0 to %s", d, shortDuration(hi))
	}
}

// shortDuration is d without the zero minutes and seconds of a whole hour.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "h0m0s") {
		return strings.TrimSuffix(s, "0m0s")
	}
	if strings.HasSuffix(s, "m0s") {
		return strings.TrimSuffix(s, "0s")
	}
	return s
}

// postgresURL reports whether s is a URL pgx reads as a PostgreSQL DSN.
func postgresURL(s string) bool {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return false
	}
	_, err := url.Parse(s) // its error would repeat s: never show it
	return err == nil
}

// dsn checks a postgres DSN without ever repeating it.
func (v *Checker) dsn(path, dsn, what string) {
	switch {
	case dsn == "":
		v.add(path, "missing: give %s as a postgres:// URL", what)
	case !postgresURL(dsn):
		v.add(path, "not a postgres:// URL: %s", postgresURLFix)
	default:
		v.Port(path, dsn, 5432)
	}
}

func (v *Checker) metadata(m string) {
	switch {
	case m == "":
		v.add("metadata", "missing: use e.g. sqlite://tidemark.db")
	case strings.HasPrefix(m, sqliteScheme):
		if m == sqliteScheme {
			v.add("metadata", "no file after sqlite://: use e.g. sqlite://tidemark.db")
		}
	case strings.HasPrefix(m, "postgres://"), strings.HasPrefix(m, "postgresql://"):
		v.dsn("metadata", m, "the metadata database")
	default:
		v.add("metadata", "not a sqlite:// or postgres:// URL: use e.g. sqlite://tidemark.db or %s",
			"postgres://user:password@host:5432/dbname")
	}
}

func (v *Checker) api(a *API) {
	if a.Listen == "" {
		v.add("api.listen", "missing: use host:port, e.g. %s", defaultListen)
	} else if _, port, err := net.SplitHostPort(a.Listen); err != nil {
		v.add("api.listen", "%q is not a host:port address: use e.g. %s", shown(a.Listen), defaultListen)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.add("api.listen", "%q is not a port: use a number from 0 to 65535", shown(port))
	}
	v.allowedHosts(a)
	names := map[string]int{}
	tokens := map[string]int{}
	for i, t := range a.Tokens {
		p := fmt.Sprintf("api.tokens[%d]", i)
		if first, dup := names[t.Name]; dup && t.Name != "" {
			hint := ""
			if t.Name == EnvTokenName {
				hint = fmt.Sprintf(" (%s adds a token named %q)", EnvAPIToken, EnvTokenName)
			}
			v.add(p+".name", "%q is used twice (also api.tokens[%d]): token names must be unique%s", shown(t.Name), first, hint)
		} else if t.Name == "" {
			v.add(p+".name", "missing: name the token after its user, e.g. ci")
		} else {
			names[t.Name] = i
		}
		if first, dup := tokens[t.Token]; dup && t.Token != "" {
			v.add(p+".token", "same token as api.tokens[%d]: give every user a token of its own", first)
		} else if t.Token == "" {
			v.add(p+".token", "missing: set the token, e.g. token: ${%s}", "CI_TOKEN")
		} else {
			tokens[t.Token] = i
		}
		if t.Role == "" {
			v.add(p+".role", "missing: give the token a role: viewer (reads), operator (also starts and stops backfills and batch runs) or admin (also pauses, resumes and resets streams, and filters backfills)")
		} else if !t.Role.Valid() {
			v.add(p+".role", "%q is not a role: use viewer, operator or admin", shown(string(t.Role)))
		}
	}
}

// allowedHosts checks api.allowed_hosts, and that a listen address beyond
// loopback has some: a browser page on another site may otherwise reach
// the API by rebinding a name of its own to the daemon's address.
func (v *Checker) allowedHosts(a *API) {
	for i, h := range a.AllowedHosts {
		p := fmt.Sprintf("api.allowed_hosts[%d]", i)
		if _, err := netip.ParsePrefix(h); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(h); err == nil {
			continue
		}
		if !hostNameRE.MatchString(h) {
			v.add(p, "%q is not a host name, an IP address or an IP network: write a name as clients type it, without scheme or port (tidemark.example.com), an address (10.0.0.5) or a network (10.0.0.0/8)", shown(h))
		}
	}
	host, _, err := net.SplitHostPort(a.Listen)
	if err != nil || LoopbackHost(host) || len(a.AllowedHosts) > 0 {
		return
	}
	v.add("api.allowed_hosts", "api.listen %q is beyond loopback: list the names and addresses clients use to reach the daemon (e.g. allowed_hosts: [tidemark.example.com, 10.0.0.0/8]), or listen on 127.0.0.1", shown(a.Listen))
}

// hostNameRE is a DNS name: dot-separated labels of letters, digits and
// hyphens.
var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

// LoopbackHost reports whether host (without port) names this machine's
// loopback interface: localhost, an address of 127.0.0.0/8 or ::1.
func LoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.Unmap().IsLoopback()
}

func (v *Checker) stream(p string, s *Stream) {
	switch {
	case s.Name == "":
		v.add(p+".name", "missing: name the stream with lower-case letters, digits and underscores, e.g. shop")
	case !streamNameRE.MatchString(s.Name):
		v.add(p+".name", "%q is not a valid name: use 1 to 48 lower-case letters, digits and underscores, starting with a letter", shown(s.Name))
	}
	v.source(p+".source", s)
	v.destination(p+".destination", s)
	v.tables(p, s)
	v.tuning(p, s)
}

func (v *Checker) source(p string, s *Stream) {
	src := &s.Source
	v.oneOf(p+".type", src.Type, sourceTypes()...)
	if k, ok := sourceKind(src.Type); ok {
		k.Validate(v, p, s)
	}
	// Names derived from the stream name are valid when the name is.
	if src.Publication != defaultNamePrefix+s.Name {
		switch {
		case src.Publication == "":
			v.add(p+".publication", "missing: leave it out to use %s<stream name>", defaultNamePrefix)
		case len(src.Publication) > maxNameBytes || strings.ContainsRune(src.Publication, 0):
			v.add(p+".publication", "%q is not a valid publication name: use at most %d bytes", shown(src.Publication), maxNameBytes)
		}
	}
	if src.Slot != defaultNamePrefix+s.Name && !slotNameRE.MatchString(src.Slot) {
		v.add(p+".slot", "%q is not a valid slot name: use 1 to %d lower-case letters, digits and underscores",
			shown(src.Slot), maxNameBytes)
	}
	v.positive(p+".status_interval", src.StatusInterval, maxStatusInterval, "10s")
	switch {
	case src.WALWarnBytes < 0:
		v.add(p+".wal_warn_bytes", "%d is out of range: use 0 (never warn) or more", src.WALWarnBytes)
	case src.WALWarnBytes > maxWALWarnBytes:
		v.add(p+".wal_warn_bytes", "%d is out of range: use 0 (never warn) to %d (1 PiB)", src.WALWarnBytes, int64(maxWALWarnBytes))
	}
	rt := &src.ReadTimeouts
	v.durationRange(p+".read_timeouts.statement", rt.Statement, 100*time.Millisecond, 24*time.Hour)
	v.durationRange(p+".read_timeouts.lock", rt.Lock, 10*time.Millisecond, time.Hour)
	v.durationRange(p+".read_timeouts.idle_in_transaction", rt.IdleInTransaction, time.Second, 24*time.Hour)
}

// destination checks a stream's destination through its type's kind;
// backfill.verify is refused where the type cannot be read back.
func (v *Checker) destination(p string, s *Stream) {
	d := &s.Destination
	v.oneOf(p+".type", d.Type, destinationTypes()...)
	k, ok := destinationKind(d.Type)
	if !ok {
		return
	}
	k.Validate(v, p, d)
	v.destinationKeys(p, k, d)
	if s.Backfill.Verify && !k.Verify {
		v.add(strings.TrimSuffix(p, ".destination")+".backfill.verify",
			"a %s destination cannot be read back, so a backfill cannot end with a verify: remove it, or set it to false", d.Type)
	}
}

// database checks the type, dsn and path of a connection (what),
// exampleFile being an example of an SQLite path.
func (v *Checker) database(p, what, typ, dsn, path, exampleFile string) {
	v.oneOf(p+".type", typ, TypePostgres, TypeSQLite)
	switch typ {
	case TypePostgres:
		v.dsn(p+".dsn", dsn, "the "+what+" database")
		if path != "" {
			v.add(p+".path", "only sqlite %ss have a path: remove it, or use dsn", what)
		}
	case TypeSQLite:
		if path == "" {
			v.add(p+".path", "missing: give the database file, e.g. path: %s", exampleFile)
		}
		if dsn != "" {
			v.add(p+".dsn", "only postgres %ss have a dsn: remove it, or use path", what)
		}
	}
}

func (v *Checker) tables(p string, s *Stream) {
	if len(s.Include) == 0 {
		v.add(p+".include", "missing: list the tables to replicate, e.g. [public.*]")
	}
	lists := []struct {
		field string
		ps    []Pattern
	}{{".include", s.Include}, {".exclude", s.Exclude}, {".backfill.exclude", s.Backfill.Exclude}}
	for _, l := range lists {
		for i, pat := range l.ps {
			if pat.schema == nil {
				v.add(fmt.Sprintf("%s%s[%d]", p, l.field, i), "empty pattern: write schema.table, e.g. public.*")
			}
		}
	}
	tables := slices.SortedFunc(maps.Keys(s.Keys), func(a, b change.TableID) int {
		return cmp.Or(strings.Compare(a.Schema, b.Schema), strings.Compare(a.Name, b.Name))
	})
	for _, t := range tables {
		kp := p + ".keys." + redactLike(FormatTable(t))
		cols := s.Keys[t]
		if len(cols) == 0 {
			v.add(kp, "no columns: list the key columns in key order, e.g. [tenant_id, id]")
		}
		for i, c := range cols {
			switch {
			case c == "":
				v.add(fmt.Sprintf("%s[%d]", kp, i), "empty column name")
			case slices.Index(cols, c) < i:
				v.add(fmt.Sprintf("%s[%d]", kp, i), "column %q is listed twice: list each key column once", shown(c))
			}
		}
		if len(s.Include) > 0 && !s.Includes(t) {
			v.add(kp, "the stream does not replicate this table: include it, or remove this key")
		}
	}
}

func (v *Checker) tuning(p string, s *Stream) {
	bf := &s.Backfill
	v.oneOf(p+".backfill.mode", bf.Mode, BackfillAutomatic, BackfillManual)
	v.intRange(p+".backfill.max_concurrent", bf.MaxConcurrent, 1, 64)
	v.intRange(p+".backfill.chunk_size", bf.ChunkSize, 1, 1000000)
	v.atLeast(p+".backfill.rows_per_second", int64(bf.RowsPerSecond), 0, MaxRowsPerSecond)
	v.atLeast(p+".backfill.window_max_changes", int64(bf.WindowMaxChanges), 1, maxWindowChanges)
	v.atLeast(p+".batch.max_changes", int64(s.Batch.MaxChanges), 1, maxBatchChanges)
	v.positive(p+".batch.max_delay", s.Batch.MaxDelay, maxBatchDelay, "200ms")
	v.positive(p+".retry.initial", s.Retry.Initial, maxRetryWait, "1s")
	switch {
	case s.Retry.Initial > 0 && s.Retry.Max < s.Retry.Initial:
		v.add(p+".retry.max", "%s is less than retry.initial (%s): use at least %s", s.Retry.Max, s.Retry.Initial, s.Retry.Initial)
	case s.Retry.Max > maxRetryWait:
		v.add(p+".retry.max", "%s is out of range: use retry.initial to %s", s.Retry.Max, shortDuration(maxRetryWait))
	}
	v.nonNegative(p+".backfill.chunk_write_target", bf.ChunkWriteTarget, maxChunkWriteTarget, "0 (always chunk_size) or a duration above 0, e.g. 20ms")
	v.nonNegative(p+".backfill.snapshot_max_hold", bf.SnapshotMaxHold, maxSnapshotHold, "0 (never load in the slot's snapshot) or a duration above 0, e.g. 1h")
	v.nonNegative(p+".lag_warn", s.LagWarn, maxLagWarn, "0 (never warn) or a duration above 0, e.g. 5m")
	v.positive(p+".discovery_interval", s.DiscoveryInterval, maxDiscoveryInterval, "10s")
}

// sharedSourceNames reports two streams that would use the same slot or
// publication in the same source database. Streams whose name is taken are
// left out: their derived names clash too, and that is reported already.
func (v *Checker) sharedSourceNames(streams []Stream, nameTaken []bool) {
	type key struct{ dsn, kind, name string }
	seen := map[key]int{}
	for i, s := range streams {
		if nameTaken[i] {
			continue
		}
		for _, kn := range [][2]string{{"slot", s.Source.Slot}, {"publication", s.Source.Publication}} {
			kind, name := kn[0], kn[1]
			k := key{s.Source.DSN, kind, name}
			if first, dup := seen[k]; dup && s.Source.DSN != "" {
				v.add(fmt.Sprintf("streams[%d].source.%s", i, kind),
					"%q is also the %s of streams[%d] on the same source: give each stream its own", shown(name), kind, first)
			} else {
				seen[k] = i
			}
		}
	}
}
