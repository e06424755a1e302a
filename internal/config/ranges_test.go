package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// numericKey is a numeric key, its documented range and how to set it.
type numericKey struct {
	path   string
	lo, hi int64 // a duration key's are nanoseconds
	dur    bool
	yaml   func(v string) string // a configuration setting the key to v
}

var numericKeys = []numericKey{
	{"api.listen", 0, 65535, false, func(v string) string { return "api: {listen: '127.0.0.1:" + v + "'}\n" + one }},
	{"streams[0].source.status_interval", 1, int64(time.Hour), true, srcKey("status_interval")},
	{"streams[0].source.wal_warn_bytes", 0, 1 << 50, false, srcKey("wal_warn_bytes")},
	{"streams[0].backfill.max_concurrent", 1, 64, false, streamKey("backfill", "max_concurrent")},
	{"streams[0].backfill.chunk_size", 1, 1_000_000, false, streamKey("backfill", "chunk_size")},
	{"streams[0].backfill.chunk_write_target", 0, int64(time.Minute), true, streamKey("backfill", "chunk_write_target")},
	{"streams[0].backfill.snapshot_max_hold", 0, int64(7 * 24 * time.Hour), true, streamKey("backfill", "snapshot_max_hold")},
	{"streams[0].backfill.rows_per_second", 0, 1_000_000_000, false, streamKey("backfill", "rows_per_second")},
	{"streams[0].backfill.window_max_changes", 1, 1_000_000_000, false, streamKey("backfill", "window_max_changes")},
	{"streams[0].batch.max_changes", 1, 10_000_000, false, streamKey("batch", "max_changes")},
	{"streams[0].batch.max_delay", 1, int64(time.Hour), true, streamKey("batch", "max_delay")},
	{"streams[0].retry.initial", 1, int64(24 * time.Hour), true, func(v string) string {
		return streams(kv{"retry": "{max: 24h, initial: " + v + "}"})
	}},
	{"streams[0].retry.max", 1, int64(24 * time.Hour), true, func(v string) string {
		return streams(kv{"retry": "{initial: 1ns, max: " + v + "}"})
	}},
	{"streams[0].lag_warn", 0, int64(30 * 24 * time.Hour), true, func(v string) string { return streams(kv{"lag_warn": v}) }},
	{"streams[0].discovery_interval", 1, int64(24 * time.Hour), true, func(v string) string { return streams(kv{"discovery_interval": v}) }},
	{"batch.output_lookback_days", 1, 3650, false, batchKey("output_lookback_days")},
	{"batch.confirm_above", 1, 1_000_000_000, false, batchKey("confirm_above")},
	{"batch.log_limit_bytes", 4096, 1 << 30, false, batchKey("log_limit_bytes")},
	{"resource_groups[0].concurrency", 1, 10_000, false, func(v string) string {
		return "resource_groups: [{name: default, concurrency: " + v + "}]\n" + oneTask
	}},
	{"tasks[0].retries", 0, 100, false, func(v string) string { return tasks(kv{"retries": v}) }},
	{"tasks[0].retry_backoff", 0, int64(24 * time.Hour), true, func(v string) string { return tasks(kv{"retry_backoff": v}) }},
	{"tasks[0].timeout", 0, int64(30 * 24 * time.Hour), true, func(v string) string { return tasks(kv{"timeout": v}) }},
}

func srcKey(key string) func(string) string {
	return func(v string) string {
		return streams(kv{"source": `{dsn: "postgres://db/x", ` + key + ": " + v + "}"})
	}
}

func streamKey(section, key string) func(string) string {
	return func(v string) string { return streams(kv{section: "{" + key + ": " + v + "}"}) }
}

func batchKey(key string) func(string) string {
	return func(v string) string { return "batch: {" + key + ": " + v + "}\n" + oneTask }
}

// TestNumericKeyBounds sets every numeric key to the bounds of its
// documented range and one past each, and to values that are no numbers
// or too large for one: the bounds pass, the others are a problem of that
// key naming what to use.
func TestNumericKeyBounds(t *testing.T) {
	for _, k := range numericKeys {
		text := func(n int64) string {
			if k.dur {
				return time.Duration(n).String()
			}
			return fmt.Sprint(n)
		}
		for _, n := range []int64{k.lo, k.hi} {
			if _, err := Parse([]byte(k.yaml(text(n))), nil); err != nil {
				t.Errorf("%s: %s: %v", k.path, text(n), err)
			}
		}
		bad := []string{text(k.lo - 1), text(k.hi + 1), "NaN", "-Inf", "1e3"}
		if k.dur {
			bad = append(bad, "1", "99999999999h")
		} else {
			bad = append(bad, "99999999999999999999", "1.5")
		}
		for _, v := range bad {
			_, err := Parse([]byte(k.yaml(v)), nil)
			ve, ok := errors.AsType[*ValidationError](err)
			if !ok {
				t.Errorf("%s: %s: error %v, want a problem", k.path, v, err)
				continue
			}
			found := false
			for _, p := range ve.Problems {
				found = found || (p.Path == k.path && strings.Contains(p.Message, "use "))
			}
			if !found {
				t.Errorf("%s: %s: problems %v, none of the key saying what to use", k.path, v, ve)
			}
		}
	}
}
