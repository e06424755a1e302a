package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// StreamState is the lifecycle state of one stream.
type StreamState struct {
	Name string `json:"name"`
	// State is one of "not_started", "starting", "running", "retrying",
	// "paused", "failed" (the State* constants).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// UpdatedAt is set to the current time by PutStream when zero.
	UpdatedAt time.Time `json:"updated_at"`
}

// ValidState reports whether state is a known stream state.
func ValidState(state string) bool {
	switch state {
	case StateNotStarted, StateStarting, StateRunning, StateRetrying, StatePaused, StateFailed:
		return true
	}
	return false
}

// ValidStatus reports whether status is a known backfill status. Objects may
// also have the empty status.
func ValidStatus(status string) bool {
	switch status {
	case StatusPending, StatusActive, StatusCompleted, StatusStopped, StatusFailed:
		return true
	}
	return false
}

// PutStream inserts or replaces the stream's state.
func (s *Store) PutStream(ctx context.Context, st StreamState) error {
	if st.Name == "" {
		return errors.New("put stream: empty name")
	}
	if !ValidState(st.State) {
		return fmt.Errorf("put stream %q: invalid state %q", st.Name, st.State)
	}
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = now()
	}
	_, err := s.exec(ctx, `INSERT INTO "streams" ("name", "state", "reason", "updated_at") VALUES (?, ?, ?, ?)
		ON CONFLICT ("name") DO UPDATE SET "state" = excluded."state", "reason" = excluded."reason", "updated_at" = excluded."updated_at"`,
		st.Name, st.State, st.Reason, s.d.timeArg(st.UpdatedAt))
	if err != nil {
		return fmt.Errorf("put stream %q: %w", st.Name, err)
	}
	return nil
}

const streamCols = `"name", "state", "reason", "updated_at"`

func scanStream(sc interface{ Scan(...any) error }) (StreamState, error) {
	var st StreamState
	var at timeCol
	if err := sc.Scan(&st.Name, &st.State, &st.Reason, &at); err != nil {
		return StreamState{}, err
	}
	st.UpdatedAt = at.T
	return st, nil
}

// GetStream returns the named stream's state, or ErrNotFound.
func (s *Store) GetStream(ctx context.Context, name string) (StreamState, error) {
	st, err := scanStream(s.queryRow(ctx, `SELECT `+streamCols+` FROM "streams" WHERE "name" = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return StreamState{}, fmt.Errorf("get stream %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return StreamState{}, fmt.Errorf("get stream %q: %w", name, err)
	}
	return st, nil
}

// ListStreams returns every stream ordered by name.
func (s *Store) ListStreams(ctx context.Context) ([]StreamState, error) {
	rows, err := s.query(ctx, `SELECT `+streamCols+` FROM "streams" ORDER BY "name"`)
	if err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	defer rows.Close()
	var out []StreamState
	for rows.Next() {
		st, err := scanStream(rows)
		if err != nil {
			return nil, fmt.Errorf("list streams: %w", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return out, nil
}

// ColumnInfo describes one column of a table as last seen by a stream.
type ColumnInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Key  bool   `json:"key,omitempty"`
}

// Object is a stream's view of one source table.
type Object struct {
	Stream, Schema, Table string
	// Status is "" (shown as "-"), "pending", "active", "completed",
	// "stopped" or "failed".
	Status string
	// Reason says why Status is "" or why it failed.
	Reason string
	// Loaded means the last backfill's final chunk is committed in the
	// destination.
	Loaded bool
	// BackfillID is the latest backfill run, 0 if none.
	BackfillID int64
	Columns    []ColumnInfo
	// UpdatedAt is set to the current time by PutObject when zero.
	UpdatedAt time.Time
}

// PutObject inserts or replaces the object keyed by (Stream, Schema, Table).
func (s *Store) PutObject(ctx context.Context, o Object) error {
	q, args, err := s.putObjectSQL(&o)
	if err != nil {
		return err
	}
	if _, err := s.exec(ctx, q, args...); err != nil {
		return fmt.Errorf("put object %s/%s.%s: %w", o.Stream, o.Schema, o.Table, err)
	}
	return nil
}

// putObjectSQL is PutObject's statement and arguments; it sets a zero
// UpdatedAt.
func (s *Store) putObjectSQL(o *Object) (string, []any, error) {
	if o.Stream == "" || o.Schema == "" || o.Table == "" {
		return "", nil, fmt.Errorf("put object %q %q.%q: stream, schema and table are required", o.Stream, o.Schema, o.Table)
	}
	if o.Status != StatusNone && !ValidStatus(o.Status) {
		return "", nil, fmt.Errorf("put object %s/%s.%s: invalid status %q", o.Stream, o.Schema, o.Table, o.Status)
	}
	if o.UpdatedAt.IsZero() {
		o.UpdatedAt = now()
	}
	cols := o.Columns
	if cols == nil {
		cols = []ColumnInfo{}
	}
	colJSON, err := json.Marshal(cols)
	if err != nil {
		return "", nil, fmt.Errorf("put object %s/%s.%s: encode columns: %w", o.Stream, o.Schema, o.Table, err)
	}
	return `INSERT INTO "objects" ("stream", "schema_name", "table_name", "status", "reason", "loaded", "backfill_id", "columns", "updated_at")
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT ("stream", "schema_name", "table_name") DO UPDATE SET
			"status" = excluded."status", "reason" = excluded."reason", "loaded" = excluded."loaded",
			"backfill_id" = excluded."backfill_id", "columns" = excluded."columns", "updated_at" = excluded."updated_at"`,
		[]any{o.Stream, o.Schema, o.Table, o.Status, o.Reason, o.Loaded, o.BackfillID, string(colJSON), s.d.timeArg(o.UpdatedAt)}, nil
}

// RecordObjects reads each named object of the stream, gives it to f
// (found false, and o zero, for one not recorded) and writes the object f
// returns, all in one transaction, each object locked from its read to the
// end (on PostgreSQL; SQLite's transaction holds the whole store): one
// sync of the store for a stream's start of many tables instead of one a
// table, and no change of an object made meanwhile is overwritten. An
// error of f rolls everything back.
func (s *Store) RecordObjects(ctx context.Context, stream string, names []ObjectName, f func(name ObjectName, o Object, found bool) (Object, error)) error {
	if len(names) == 0 {
		return nil
	}
	lock := ""
	if s.d.name == dialectPostgres {
		lock = ` FOR UPDATE`
	}
	get := s.d.rebind(`SELECT ` + objectCols + ` FROM "objects"
		WHERE "stream" = ? AND "schema_name" = ? AND "table_name" = ?` + lock)
	return s.writeTx(ctx, "tx record_objects", func(tx *sql.Tx) error {
		if err := s.checkWriteFence(ctx, tx); err != nil {
			return err
		}
		for _, n := range names {
			o, err := scanObject(tx.QueryRowContext(ctx, get, stream, n.Schema, n.Table))
			found := err == nil
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("get object %s/%s.%s: %w", stream, n.Schema, n.Table, err)
			}
			if !found {
				o = Object{}
			}
			if o, err = f(n, o, found); err != nil {
				return err
			}
			o.Stream, o.Schema, o.Table = stream, n.Schema, n.Table
			q, args, err := s.putObjectSQL(&o)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(q), args...); err != nil {
				return fmt.Errorf("put object %s/%s.%s: %w", o.Stream, o.Schema, o.Table, err)
			}
		}
		return nil
	})
}

// SetRunObjectStatus records status and reason on a stream's object when
// its latest backfill is backfillID, and reports whether it did. One
// statement, which neither reads the object first nor rewrites its columns:
// a backfill initiated meanwhile (the object's latest then) is left alone.
func (s *Store) SetRunObjectStatus(ctx context.Context, stream, schema, table string, backfillID int64, status, reason string) (bool, error) {
	if !ValidStatus(status) {
		return false, fmt.Errorf("set status of object %s/%s.%s: invalid status %q", stream, schema, table, status)
	}
	return s.updateObject(ctx, objectRow{stream, schema, table, backfillID, false}, "set status of",
		`"status" = ?, "reason" = ?, "updated_at" = ?`, status, reason, s.d.timeArg(now()))
}

// SetRunObjectReason is SetRunObjectStatus for the reason alone.
func (s *Store) SetRunObjectReason(ctx context.Context, stream, schema, table string, backfillID int64, reason string) (bool, error) {
	return s.updateObject(ctx, objectRow{stream, schema, table, backfillID, false}, "set reason of",
		`"reason" = ?, "updated_at" = ?`, reason, s.d.timeArg(now()))
}

// MarkRunObjectLoaded records a stream's object as loaded when its latest
// backfill is backfillID and it is not loaded yet, in one statement, and
// reports whether it did (false too when it already was).
func (s *Store) MarkRunObjectLoaded(ctx context.Context, stream, schema, table string, backfillID int64) (bool, error) {
	return s.updateObject(ctx, objectRow{stream, schema, table, backfillID, true}, "mark loaded",
		`"loaded" = ?, "updated_at" = ?`, true, s.d.timeArg(now()))
}

// SetObjectStatus records status and reason on a stream's object whatever
// its latest backfill, in one statement that leaves the rest of the object
// alone (a backfill initiated meanwhile keeps its id and loaded flag). An
// object not recorded is ErrNotFound.
func (s *Store) SetObjectStatus(ctx context.Context, stream, schema, table, status, reason string) error {
	if !ValidStatus(status) {
		return fmt.Errorf("set status of object %s/%s.%s: invalid status %q", stream, schema, table, status)
	}
	ok, err := s.updateObject(ctx, objectRow{stream, schema, table, anyBackfill, false}, "set status of",
		`"status" = ?, "reason" = ?, "updated_at" = ?`, status, reason, s.d.timeArg(now()))
	if err == nil && !ok {
		err = fmt.Errorf("set status of object %s/%s.%s: %w", stream, schema, table, ErrNotFound)
	}
	return err
}

// objectRow picks an object: of a backfill it must be the latest of
// (anyBackfill: whichever), and when unloaded only if it is not loaded.
type objectRow struct {
	stream, schema, table string
	backfillID            int64
	unloaded              bool
}

const anyBackfill = -1

// updateObject sets set, with args, on the object of row and reports
// whether there was one to change.
func (s *Store) updateObject(ctx context.Context, row objectRow, what, set string, args ...any) (bool, error) {
	q, args := objectUpdateSQL(row, set, args)
	res, err := s.exec(ctx, q, args...)
	return objectUpdated(row, what, res, err)
}

// objectUpdateSQL is updateObject's statement and arguments.
func objectUpdateSQL(row objectRow, set string, args []any) (string, []any) {
	q := `UPDATE "objects" SET ` + set + ` WHERE "stream" = ? AND "schema_name" = ? AND "table_name" = ?`
	args = append(args, row.stream, row.schema, row.table)
	if row.backfillID != anyBackfill {
		q += ` AND "backfill_id" = ?`
		args = append(args, row.backfillID)
	}
	if row.unloaded {
		q += ` AND NOT "loaded"`
	}
	return q, args
}

// objectUpdated is the outcome of updateObject's statement: whether it
// changed the object.
func objectUpdated(row objectRow, what string, res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("%s object %s/%s.%s: %w", what, row.stream, row.schema, row.table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s object %s/%s.%s: %w", what, row.stream, row.schema, row.table, err)
	}
	return n == 1, nil
}

// RunObjectChange is what a change of a backfill's record also does to its
// object, when the object's latest backfill is that one: set its status
// and reason (as SetRunObjectStatus), or mark it loaded (Loaded, as
// MarkRunObjectLoaded).
type RunObjectChange struct {
	Status, Reason string
	Loaded         bool
}

// UpdateBackfillAndObject is UpdateBackfill and then the change o on the
// backfill's object, in one transaction: one sync of the store, not two,
// at each start and end of a backfill (in a stream of many small tables
// the store's syncs bounded how many tables a second were loaded). It
// reports whether the object changed.
func (s *Store) UpdateBackfillAndObject(ctx context.Context, b Backfill, o RunObjectChange) (bool, error) {
	r, err := s.runObjectSQL(b, o)
	if err != nil {
		return false, err
	}
	changed := false
	err = s.writeTx(ctx, "tx update_backfill_object", func(tx *sql.Tx) error {
		if err := s.checkWriteFence(ctx, tx); err != nil {
			return err
		}
		changed, err = r.exec(ctx, s, tx)
		return err
	})
	return changed, err
}

// runObjectSQL is a change of a backfill's record and its object, built
// and checked before a transaction runs it.
type runObjectSQL struct {
	id           int64
	row          objectRow
	what         string
	bq, oq       string
	bargs, oargs []any
}

// runObjectSQL builds UpdateBackfillAndObject's statements.
func (s *Store) runObjectSQL(b Backfill, o RunObjectChange) (runObjectSQL, error) {
	r := runObjectSQL{id: b.ID, row: objectRow{b.Stream, b.Schema, b.Table, b.ID, o.Loaded}}
	var set string
	var args []any
	switch {
	case o.Loaded && o.Status == "":
		r.what, set, args = "mark loaded", `"loaded" = ?, "updated_at" = ?`, []any{true, s.d.timeArg(now())}
	case !o.Loaded && ValidStatus(o.Status):
		r.what, set, args = "set status of", `"status" = ?, "reason" = ?, "updated_at" = ?`, []any{o.Status, o.Reason, s.d.timeArg(now())}
	default:
		return r, fmt.Errorf("update backfill %d and its object: want a valid status or loaded, not %+v", b.ID, o)
	}
	var err error
	if r.bq, r.bargs, err = s.updateBackfillSQL(b); err != nil {
		return r, err
	}
	r.oq, r.oargs = objectUpdateSQL(r.row, set, args)
	return r, nil
}

// exec runs the change in tx and reports whether the object changed.
func (r runObjectSQL) exec(ctx context.Context, s *Store, tx *sql.Tx) (bool, error) {
	res, err := tx.ExecContext(ctx, s.d.rebind(r.bq), r.bargs...)
	if err := backfillUpdated(r.id, res, err); err != nil {
		return false, err
	}
	res, err = tx.ExecContext(ctx, s.d.rebind(r.oq), r.oargs...)
	return objectUpdated(r.row, r.what, res, err)
}

// SetObjectColumns records an object's columns and leaves the rest of it
// alone, so that it races no status change. An object not recorded yet is
// left unrecorded.
func (s *Store) SetObjectColumns(ctx context.Context, stream, schema, table string, cols []ColumnInfo) error {
	if cols == nil {
		cols = []ColumnInfo{}
	}
	colJSON, err := json.Marshal(cols)
	if err != nil {
		return fmt.Errorf("set columns of object %s/%s.%s: %w", stream, schema, table, err)
	}
	_, err = s.exec(ctx, `UPDATE "objects" SET "columns" = ?, "updated_at" = ?
		WHERE "stream" = ? AND "schema_name" = ? AND "table_name" = ?`,
		string(colJSON), s.d.timeArg(now()), stream, schema, table)
	if err != nil {
		return fmt.Errorf("set columns of object %s/%s.%s: %w", stream, schema, table, err)
	}
	return nil
}

const objectCols = `"stream", "schema_name", "table_name", "status", "reason", "loaded", "backfill_id", "columns", "updated_at"`

func scanObject(sc interface{ Scan(...any) error }) (Object, error) {
	var o Object
	var cols []byte
	var at timeCol
	if err := sc.Scan(&o.Stream, &o.Schema, &o.Table, &o.Status, &o.Reason, &o.Loaded, &o.BackfillID, &cols, &at); err != nil {
		return Object{}, err
	}
	if err := json.Unmarshal(cols, &o.Columns); err != nil {
		return Object{}, fmt.Errorf("decode columns of %s/%s.%s: %w", o.Stream, o.Schema, o.Table, err)
	}
	if len(o.Columns) == 0 {
		o.Columns = nil
	}
	o.UpdatedAt = at.T
	return o, nil
}

// GetObject returns one object, or ErrNotFound.
func (s *Store) GetObject(ctx context.Context, stream, schema, table string) (Object, error) {
	o, err := scanObject(s.queryRow(ctx, `SELECT `+objectCols+` FROM "objects"
		WHERE "stream" = ? AND "schema_name" = ? AND "table_name" = ?`, stream, schema, table))
	if errors.Is(err, sql.ErrNoRows) {
		return Object{}, fmt.Errorf("get object %s/%s.%s: %w", stream, schema, table, ErrNotFound)
	}
	if err != nil {
		return Object{}, fmt.Errorf("get object %s/%s.%s: %w", stream, schema, table, err)
	}
	return o, nil
}

// ListObjects returns the stream's objects ordered by schema and table. An
// empty stream lists the objects of every stream, ordered by stream first.
func (s *Store) ListObjects(ctx context.Context, stream string) ([]Object, error) {
	q := `SELECT ` + objectCols + ` FROM "objects"`
	var args []any
	if stream != "" {
		q += ` WHERE "stream" = ?`
		args = append(args, stream)
	}
	q += ` ORDER BY "stream", "schema_name", "table_name"`
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	defer rows.Close()
	var out []Object
	for rows.Next() {
		o, err := scanObject(rows)
		if err != nil {
			return nil, fmt.Errorf("list objects: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	return out, nil
}
