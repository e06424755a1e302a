package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Counters are event and byte totals for one table.
type Counters struct {
	EventsProcessed, EventsLoaded, BytesProcessed, BytesLoaded int64
}

// TableCounters are one table's counters, for AddTablesCounters.
type TableCounters struct {
	Schema, Table string
	Counters
}

// AddCounters adds c to the row for (stream, schema, table) on day's UTC
// calendar day, creating the row if needed.
func (s *Store) AddCounters(ctx context.Context, stream, schema, table string, day time.Time, c Counters) error {
	return s.AddTablesCounters(ctx, stream, day, []TableCounters{{Schema: schema, Table: table, Counters: c}})
}

// AddTablesCounters is AddCounters for several tables of a stream in one
// transaction: a destination commit touches many tables, and a write of
// its own for each (on SQLite, a sync of the file each) held the stream's
// writer back before its next batch. Nothing is added when one is invalid.
func (s *Store) AddTablesCounters(ctx context.Context, stream string, day time.Time, cs []TableCounters) error {
	names, sums, err := summedCounters(stream, day, cs)
	if err != nil || len(names) == 0 {
		return err
	}
	fail := func(err error) error {
		return fmt.Errorf("add counters of stream %s (%d tables): %w", stream, len(names), err)
	}
	if len(names) <= countersPerStatement { // one statement is atomic alone
		q, args := s.addCountersSQL(stream, day, names, sums)
		if _, err := s.exec(ctx, q, args...); err != nil {
			return fail(err)
		}
		return nil
	}
	err = s.writeTx(ctx, "tx add_counters", func(tx *sql.Tx) error {
		if err := s.checkWriteFence(ctx, tx); err != nil {
			return err
		}
		return s.addCounters(ctx, tx, stream, day, names, sums)
	})
	if err != nil {
		return fail(err)
	}
	return nil
}

// summedCounters checks cs and sums them by table: a table named twice is
// added once (one statement cannot update a row twice), and every writer
// takes its row locks in one order (names, sorted).
func summedCounters(stream string, day time.Time, cs []TableCounters) ([]ObjectName, map[ObjectName]Counters, error) {
	for _, c := range cs {
		if stream == "" || c.Schema == "" || c.Table == "" {
			return nil, nil, fmt.Errorf("add counters %q %q.%q: stream, schema and table are required", stream, c.Schema, c.Table)
		}
		if day.IsZero() {
			return nil, nil, fmt.Errorf("add counters %s/%s.%s: zero day", stream, c.Schema, c.Table)
		}
	}
	sums := map[ObjectName]Counters{}
	for _, c := range cs {
		k := ObjectName{Schema: c.Schema, Table: c.Table}
		t := sums[k]
		t.EventsProcessed += c.EventsProcessed
		t.EventsLoaded += c.EventsLoaded
		t.BytesProcessed += c.BytesProcessed
		t.BytesLoaded += c.BytesLoaded
		sums[k] = t
	}
	names := slices.SortedFunc(maps.Keys(sums), func(a, b ObjectName) int {
		return cmp.Or(cmp.Compare(a.Schema, b.Schema), cmp.Compare(a.Table, b.Table))
	})
	return names, sums, nil
}

// addCounters adds the tables' counters in tx, countersPerStatement at a
// time.
func (s *Store) addCounters(ctx context.Context, tx *sql.Tx, stream string, day time.Time, names []ObjectName, sums map[ObjectName]Counters) error {
	for start := 0; start < len(names); start += countersPerStatement {
		part := names[start:min(start+countersPerStatement, len(names))]
		q, args := s.addCountersSQL(stream, day, part, sums)
		if _, err := tx.ExecContext(ctx, s.d.rebind(q), args...); err != nil {
			return fmt.Errorf("tables %d to %d: %w", start+1, start+len(part), err)
		}
	}
	return nil
}

// RecordCommit records what one destination commit of a stream loaded,
// in one transaction: the tables' counters (as AddTablesCounters), and
// each run of loaded, whose last chunk the commit held, with its object
// marked loaded (as UpdateBackfillAndObject with Loaded). One sync of the
// store instead of one and one a run: in a stream of many small tables
// these were two of a table's few. With no run it is AddTablesCounters.
// The transaction checks ctx's write fence, if any, counters and all:
// a node fenced out records none of them.
func (s *Store) RecordCommit(ctx context.Context, stream string, day time.Time, cs []TableCounters, loaded []Backfill) error {
	if len(loaded) == 0 {
		return s.AddTablesCounters(ctx, stream, day, cs)
	}
	names, sums, err := summedCounters(stream, day, cs)
	if err != nil {
		return err
	}
	runs := make([]runObjectSQL, len(loaded))
	for i, b := range loaded {
		if runs[i], err = s.runObjectSQL(b, RunObjectChange{Loaded: true}); err != nil {
			return err
		}
	}
	return s.writeTx(ctx, "tx record_commit", func(tx *sql.Tx) error {
		if err := s.checkWriteFence(ctx, tx); err != nil {
			return err
		}
		if err := s.addCounters(ctx, tx, stream, day, names, sums); err != nil {
			return fmt.Errorf("add counters of stream %s (%d tables): %w", stream, len(names), err)
		}
		for _, r := range runs {
			if _, err := r.exec(ctx, s, tx); err != nil {
				return err
			}
		}
		return nil
	})
}

// countersPerStatement bounds the rows of one statement of
// AddTablesCounters: 8 parameters a row.
const countersPerStatement = 500

// addCountersSQL is the statement that adds the counters of tables.
func (s *Store) addCountersSQL(stream string, day time.Time, tables []ObjectName, sums map[ObjectName]Counters) (string, []any) {
	var q strings.Builder
	q.WriteString(`INSERT INTO "counters" ("stream", "schema_name", "table_name", "day",
		"events_processed", "events_loaded", "bytes_processed", "bytes_loaded") VALUES `)
	args := make([]any, 0, 8*len(tables))
	for i, n := range tables {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		c := sums[n]
		args = append(args, stream, n.Schema, n.Table, s.d.dayArg(day), c.EventsProcessed, c.EventsLoaded, c.BytesProcessed, c.BytesLoaded)
	}
	q.WriteString(` ON CONFLICT ("stream", "schema_name", "table_name", "day") DO UPDATE SET
		"events_processed" = "counters"."events_processed" + excluded."events_processed",
		"events_loaded" = "counters"."events_loaded" + excluded."events_loaded",
		"bytes_processed" = "counters"."bytes_processed" + excluded."bytes_processed",
		"bytes_loaded" = "counters"."bytes_loaded" + excluded."bytes_loaded"`)
	return q.String(), args
}

// SumCounters sums the counters of (stream, schema, table) over the UTC days
// on or after since's UTC day; a zero since sums every day. Empty stream,
// schema or table match all, so SumCounters(ctx, "s", "", "", t) totals a
// whole stream.
func (s *Store) SumCounters(ctx context.Context, stream, schema, table string, since time.Time) (Counters, error) {
	var where []string
	var args []any
	for _, kv := range []struct{ col, v string }{
		{`"stream"`, stream}, {`"schema_name"`, schema}, {`"table_name"`, table},
	} {
		if kv.v != "" {
			where = append(where, kv.col+` = ?`)
			args = append(args, kv.v)
		}
	}
	if !since.IsZero() {
		where = append(where, `"day" >= ?`)
		args = append(args, s.d.dayArg(since))
	}
	q := `SELECT CAST(COALESCE(SUM("events_processed"), 0) AS BIGINT), CAST(COALESCE(SUM("events_loaded"), 0) AS BIGINT),
		CAST(COALESCE(SUM("bytes_processed"), 0) AS BIGINT), CAST(COALESCE(SUM("bytes_loaded"), 0) AS BIGINT)
		FROM "counters"`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	var c Counters
	if err := s.queryRow(ctx, q, args...).Scan(&c.EventsProcessed, &c.EventsLoaded, &c.BytesProcessed, &c.BytesLoaded); err != nil {
		return Counters{}, fmt.Errorf("sum counters %s/%s.%s: %w", stream, schema, table, err)
	}
	return c, nil
}

// SumCountersByObject sums a stream's counters per object over the UTC days
// on or after since's UTC day, in one query; objects without counters are
// absent.
func (s *Store) SumCountersByObject(ctx context.Context, stream string, since time.Time) (map[ObjectName]Counters, error) {
	rows, err := s.query(ctx, `SELECT "schema_name", "table_name",
		CAST(SUM("events_processed") AS BIGINT), CAST(SUM("events_loaded") AS BIGINT),
		CAST(SUM("bytes_processed") AS BIGINT), CAST(SUM("bytes_loaded") AS BIGINT)
		FROM "counters" WHERE "stream" = ? AND "day" >= ?
		GROUP BY "schema_name", "table_name"`, stream, s.d.dayArg(since))
	if err != nil {
		return nil, fmt.Errorf("sum counters of stream %s: %w", stream, err)
	}
	defer rows.Close()
	out := map[ObjectName]Counters{}
	for rows.Next() {
		var n ObjectName
		var c Counters
		if err := rows.Scan(&n.Schema, &n.Table, &c.EventsProcessed, &c.EventsLoaded, &c.BytesProcessed, &c.BytesLoaded); err != nil {
			return nil, fmt.Errorf("sum counters of stream %s: %w", stream, err)
		}
		out[n] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sum counters of stream %s: %w", stream, err)
	}
	return out, nil
}

// ObjectName is a table's schema and name.
type ObjectName struct{ Schema, Table string }
