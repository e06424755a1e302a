package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migrations live in migrations/<dialect>/NNN_name.sql. Both dialects must
// have the same versions; each file runs in its own transaction and is
// recorded in schema_migrations.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the dialect's migrations in version order.
func (d *dialect) migrations() ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		file := e.Name()
		if e.IsDir() || !strings.HasSuffix(file, ".sql") {
			continue
		}
		num, name, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || name == "" {
			return nil, fmt.Errorf("migration %s/%s: name must be NNN_name.sql", dir, file)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s in %s share version %d", other, file, dir, v)
		}
		seen[v] = file
		body, err := fs.ReadFile(migrationFS, path.Join(dir, file))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", file, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations embedded in %s", dir)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate creates schema_migrations and applies every migration not yet
// recorded there, in order, each in its own transaction. Re-running it on an
// up-to-date database changes nothing.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := s.d.migrations()
	if err != nil {
		return err
	}
	if err := s.migrationTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.d.migrationsDDL)
		return err
	}); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if latest := ms[len(ms)-1].version; current > latest {
		return fmt.Errorf("database schema version %d is newer than this tidemark supports (%d): upgrade tidemark", current, latest)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if err := s.migrationTx(ctx, func(tx *sql.Tx) error {
			// Another process may have applied it while we waited for the lock.
			var n int
			if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM "schema_migrations" WHERE "version" = ?`), m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "schema_migrations" ("version", "name", "applied_at") VALUES (?, ?, ?)`),
				m.version, m.name, s.d.timeArg(now()))
			return err
		}); err != nil {
			return fmt.Errorf("apply migration %03d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

// SchemaVersion is the highest migration version applied to the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := s.queryRow(ctx, `SELECT MAX("version") FROM "schema_migrations"`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// migrationTx runs f in a transaction that first takes the dialect's migration lock.
func (s *Store) migrationTx(ctx context.Context, f func(*sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	if s.d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.migrationLock); err != nil {
			return err
		}
	}
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// ignoreDone drops sql.ErrTxDone, which Rollback returns after a failed Commit.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
