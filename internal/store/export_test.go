package store

import "context"

// Test-only access to internals, for store_test.

// Rebind rewrites ? placeholders as the named dialect would.
func Rebind(dialectName, q string) string {
	if dialectName == dialectPostgres {
		return postgresDialect.rebind(q)
	}
	return sqliteDialect.rebind(q)
}

// QueryString runs a one-value query on s's database.
func QueryString(ctx context.Context, s *Store, q string, args ...any) (string, error) {
	var v string
	err := s.queryRow(ctx, q, args...).Scan(&v)
	return v, err
}

// Exec runs a statement on s's database.
func Exec(ctx context.Context, s *Store, q string, args ...any) error {
	_, err := s.exec(ctx, q, args...)
	return err
}

// MigrationCount is the number of embedded migrations for the dialect.
func MigrationCount(dialectName string) int {
	d := sqliteDialect
	if dialectName == dialectPostgres {
		d = postgresDialect
	}
	ms, err := d.migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// HoldFencedTx begins a transaction that passes the FenceBatchWrites check
// and leaves it open, the way a node frozen mid-write would; end rolls it
// back and reports the error the rollback met (the server may have ended
// the session first).
func HoldFencedTx(ctx context.Context, s *Store) (end func() error, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := s.checkFenceTx(ctx, tx); err != nil {
		tx.Rollback()
		return nil, err
	}
	return tx.Rollback, nil
}
