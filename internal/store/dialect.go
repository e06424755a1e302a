package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// sqliteTimeLayout is RFC 3339 with a fixed nine-digit fraction, so stored
// times compare correctly as text (time.RFC3339Nano drops trailing zeros,
// which would sort "…:05Z" after "…:05.5Z").
const sqliteTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// dialect is everything that differs between SQLite and PostgreSQL.
type dialect struct {
	name   string
	driver string // database/sql driver name
	// dollar rebinds ? placeholders to $1, $2, …
	dollar bool
	// migrationsDDL creates the schema_migrations table if missing.
	migrationsDDL string
	// migrationLock, run first in each migration transaction, serialises
	// concurrent Opens of one database. Empty when BEGIN already does that.
	migrationLock string
}

var sqliteDialect = &dialect{
	name:   dialectSQLite,
	driver: "sqlite",
	migrationsDDL: `CREATE TABLE IF NOT EXISTS "schema_migrations" (
		"version" INTEGER NOT NULL PRIMARY KEY,
		"name" TEXT NOT NULL,
		"applied_at" TEXT NOT NULL
	) STRICT`,
	// _txlock=immediate: BEGIN takes the database write lock.
}

var postgresDialect = &dialect{
	name:   dialectPostgres,
	driver: "pgx",
	dollar: true,
	migrationsDDL: `CREATE TABLE IF NOT EXISTS "schema_migrations" (
		"version" BIGINT NOT NULL PRIMARY KEY,
		"name" TEXT NOT NULL,
		"applied_at" TIMESTAMPTZ NOT NULL
	)`,
	// An arbitrary constant key ("tidemark" in ASCII), held to commit.
	migrationLock: `SELECT pg_advisory_xact_lock(7594876915033286507)`,
}

// rebind rewrites ? placeholders for the dialect. Question marks inside
// quoted literals or identifiers are left alone.
func (d *dialect) rebind(q string) string {
	if !d.dollar {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// timeArg is the query argument for a time column.
func (d *dialect) timeArg(t time.Time) any {
	t = normTime(t)
	if d.name == dialectSQLite {
		return t.Format(sqliteTimeLayout)
	}
	return t
}

// nullTimeArg is timeArg for a nullable column.
func (d *dialect) nullTimeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.timeArg(*t)
}

// dayArg is the query argument for a counters day: t's UTC calendar day.
func (d *dialect) dayArg(t time.Time) any {
	y, m, dd := t.UTC().Date()
	day := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)
	if d.name == dialectSQLite {
		return day.Format(time.DateOnly)
	}
	return day
}

// timeCol scans a time column of either dialect into UTC.
type timeCol struct {
	T     time.Time
	Valid bool
}

func (c *timeCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c = timeCol{}
		return nil
	case time.Time:
		*c = timeCol{T: v.UTC(), Valid: true}
		return nil
	case string:
		return c.parse(v)
	case []byte:
		return c.parse(string(v))
	default:
		return fmt.Errorf("scan time: unsupported type %T", src)
	}
}

func (c *timeCol) parse(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("scan time: %w", err)
	}
	*c = timeCol{T: t.UTC(), Valid: true}
	return nil
}

// ptr returns the time or nil for NULL.
func (c timeCol) ptr() *time.Time {
	if !c.Valid {
		return nil
	}
	t := c.T
	return &t
}
