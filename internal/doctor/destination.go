package doctor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/source"
)

// The destinations keep each stream's checkpoint in these tables (see the
// sink packages); the doctor reads them without creating anything.
const (
	// The resume token is read as a field of the row: a checkpoint table
	// from before tokens were stored has no such column.
	pgCheckpointSQL = `SELECT "position", coalesce(to_jsonb(c) ->> 'resume', '')
		FROM "_tidemark"."checkpoint" c WHERE "stream" = $1`
	sqliteCheckpointSQL = `SELECT "position", coalesce((SELECT 1 FROM pragma_table_info('_tidemark_checkpoint') WHERE "name" = 'resume'), 0)
		FROM "_tidemark_checkpoint" WHERE "stream" = ?`
	sqliteResumeSQL     = `SELECT "resume" FROM "_tidemark_checkpoint" WHERE "stream" = ?`
	sqliteHasCheckpoint = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_tidemark_checkpoint'`
)

// checkDestination checks streams[i]'s destination and reads the position
// it committed for the stream.
func checkDestination(ctx context.Context, i int, s *config.Stream) ([]Check, checkpoint) {
	name := "stream " + s.Name + ": destination"
	key := fmt.Sprintf("streams[%d].destination", i)
	// The checkpoint is shown in the source's notation.
	at := func(cp checkpoint) string { return positionText(s.Source.Type, cp.position, cp.resume) }
	switch s.Destination.Type {
	case config.TypePostgres:
		c, cp := postgresDestination(ctx, name, key, s.Name, s.Destination.DSN, at)
		return []Check{c}, cp
	case config.TypeSQLite:
		return sqliteDestination(ctx, name, key, s.Name, s.Destination.Path, at)
	}
	return []Check{fail(name, fmt.Sprintf("destination type %q is not supported", s.Destination.Type), "set "+key+".type to postgres or sqlite")}, checkpoint{}
}

func postgresDestination(ctx context.Context, name, key, stream, dsn string, positionText func(checkpoint) string) (Check, checkpoint) {
	conn, err := connect(ctx, dsn)
	if err != nil {
		return fail(name, errText(err), connectFix(err, key+".dsn")), checkpoint{}
	}
	defer closeConn(conn)
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var version, db, user string
	var schema, canCreate bool
	err = conn.QueryRow(ctx, `
		SELECT current_setting('server_version'), current_database()::text, current_user::text,
		       EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '_tidemark'),
		       has_database_privilege(current_database(), 'CREATE')`).Scan(&version, &db, &user, &schema, &canCreate)
	if err != nil {
		return fail(name, "connected, but cannot query: "+errText(err), connectFix(err, key+".dsn")), checkpoint{}
	}
	at := fmt.Sprintf("%s (PostgreSQL %s)", where(conn.Config()), version)
	if !schema && !canCreate {
		return fail(name, fmt.Sprintf("%s: %s lacks CREATE on database %s, which creating tidemark's schema _tidemark needs", at, user, db),
			fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s;", ident(db), ident(user))), checkpoint{known: true}
	}
	cp := checkpoint{known: true}
	var pos int64
	err = conn.QueryRow(ctx, pgCheckpointSQL, stream).Scan(&pos, &cp.resume)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		cp.position = change.LSN(uint64(pos))
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000"):
	default:
		return fail(name, fmt.Sprintf("%s: cannot read the stream's checkpoint: %s", at, errText(err)), ""), checkpoint{}
	}
	return ok(name, "connected to "+at+"; "+positionText(cp)), cp
}

// positionText tells where a stream's checkpoint is, in the notation of
// its source's type, with its resume token (a MySQL GTID state) if any.
func positionText(sourceType string, pos change.LSN, resume string) string {
	if pos == 0 {
		return "no checkpoint of the stream yet"
	}
	return "the stream's checkpoint is at " + source.FormatCheckpoint(sourceType, pos, resume)
}

func sqliteDestination(ctx context.Context, name, key, stream, path string, positionText func(checkpoint) string) ([]Check, checkpoint) {
	dir := filepath.Dir(path)
	if c, good := writableDir(name, key+".path", dir); !good {
		// Without its directory the destination holds nothing: to the
		// stream that is a first start.
		_, err := os.Stat(dir)
		return []Check{c}, checkpoint{known: errors.Is(err, os.ErrNotExist)}
	}
	disk := diskSpace("stream "+stream+": destination disk", dir)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return []Check{ok(name, fmt.Sprintf("%s does not exist yet: tidemark creates it (directory %s is writable)", path, dir)), disk}, checkpoint{known: true}
	case err != nil:
		return []Check{fail(name, errText(err), "")}, checkpoint{}
	case !info.Mode().IsRegular():
		return []Check{fail(name, path+" is not a regular file", "correct "+key+".path")}, checkpoint{}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return []Check{fail(name, fmt.Sprintf("%s is not writable: %s", path, errText(err)),
			"make the file writable by the user tidemark runs as (chown, chmod)")}, checkpoint{}
	}
	f.Close()
	cp, err := sqlitePosition(ctx, path, stream)
	if err != nil {
		return []Check{fail(name, fmt.Sprintf("%s: %s", path, errText(err)), "correct "+key+".path: it must be a SQLite database, or a path where one can be created")}, checkpoint{}
	}
	return []Check{ok(name, fmt.Sprintf("%s is a writable SQLite database; %s", path, positionText(cp))), disk}, cp
}

// sqlitePosition reads the stream's checkpoint from a SQLite destination.
func sqlitePosition(ctx context.Context, path, stream string) (checkpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	db, err := openSQLite(path)
	if err != nil {
		return checkpoint{}, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, sqliteHasCheckpoint).Scan(&n); err != nil {
		return checkpoint{}, err
	}
	cp := checkpoint{known: true}
	if n == 0 {
		return cp, nil
	}
	var pos int64
	var hasResume bool
	err = db.QueryRowContext(ctx, sqliteCheckpointSQL, stream).Scan(&pos, &hasResume)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return checkpoint{}, err
	}
	cp.position = change.LSN(uint64(pos))
	if hasResume {
		if err := db.QueryRowContext(ctx, sqliteResumeSQL, stream).Scan(&cp.resume); err != nil {
			return checkpoint{}, err
		}
	}
	return cp, nil
}

// openSQLite opens an existing SQLite file for reading.
func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// writableDir checks that dir exists and that a file can be created in
// it; key is the configuration key of the path.
func writableDir(name, key, dir string) (Check, bool) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fail(name, fmt.Sprintf("directory %s does not exist", dir), fmt.Sprintf("mkdir -p %s  (or correct %s)", dir, key)), false
	case err != nil:
		return fail(name, errText(err), "correct "+key), false
	case !info.IsDir():
		return fail(name, dir+" is not a directory", "correct "+key), false
	}
	f, err := os.CreateTemp(dir, ".tidemark-doctor-*")
	if err != nil {
		return fail(name, fmt.Sprintf("directory %s is not writable: %s", dir, errText(err)),
			fmt.Sprintf("make %s writable by the user tidemark runs as (chown, chmod), or correct %s", dir, key)), false
	}
	f.Close()
	os.Remove(f.Name())
	return Check{}, true
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
