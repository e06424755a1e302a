package config

// Stage 2, second half: from the raw shape to a Config. Every value is
// expanded, converted to its Go type and, when absent or empty, replaced by
// its default. A value that does not convert is reported and left at its
// default, so that validation does not complain about it a second time.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// Defaults.
const (
	defaultMetadata         = "sqlite://tidemark.db"
	defaultListen           = "127.0.0.1:7420"
	defaultNamePrefix       = "tidemark_" // of publication and slot names
	defaultStatusInterval   = 10 * time.Second
	defaultWALWarnBytes     = 1 << 30
	defaultMaxConcurrent    = 2
	defaultChunkSize        = 10000
	defaultWindowMaxChanges = 100000
	defaultBatchMaxChanges  = 10000
	defaultBatchMaxDelay    = 200 * time.Millisecond
	defaultRetryInitial     = time.Second
	defaultRetryMax         = time.Minute
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
		})
	}
	for i := range r.Streams {
		c.Streams = append(c.Streams, b.stream(fmt.Sprintf("streams[%d]", i), &r.Streams[i]))
	}
	return c
}

func (b *builder) stream(p string, r *rawStream) Stream {
	name := b.str(p+".name", r.Name, "")
	bf := &r.Backfill
	return Stream{
		Name: name,
		Source: Source{
			Type:           b.str(p+".source.type", r.Source.Type, TypePostgres),
			DSN:            b.str(p+".source.dsn", r.Source.DSN, ""),
			Publication:    b.str(p+".source.publication", r.Source.Publication, defaultNamePrefix+name),
			Slot:           b.str(p+".source.slot", r.Source.Slot, defaultNamePrefix+name),
			StatusInterval: b.duration(p+".source.status_interval", r.Source.StatusInterval, defaultStatusInterval),
			WALWarnBytes:   b.integer(p+".source.wal_warn_bytes", r.Source.WALWarnBytes, defaultWALWarnBytes),
		},
		Destination: Destination{
			Type: b.str(p+".destination.type", r.Destination.Type, ""),
			DSN:  b.str(p+".destination.dsn", r.Destination.DSN, ""),
			Path: b.str(p+".destination.path", r.Destination.Path, ""),
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
		},
		Batch: Batch{
			MaxChanges: int(b.integer(p+".batch.max_changes", r.Batch.MaxChanges, defaultBatchMaxChanges)),
			MaxDelay:   b.duration(p+".batch.max_delay", r.Batch.MaxDelay, defaultBatchMaxDelay),
		},
		Retry: Retry{
			Initial: b.duration(p+".retry.initial", r.Retry.Initial, defaultRetryInitial),
			Max:     b.duration(p+".retry.max", r.Retry.Max, defaultRetryMax),
		},
	}
}
