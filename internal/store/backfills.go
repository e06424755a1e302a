package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Backfill is one backfill run of one table.
type Backfill struct {
	ID     int64  `json:"id"`
	Stream string `json:"stream"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// StartedBy is "automatic", "cli", "api", "api:<token name>" or "reset".
	StartedBy string `json:"started_by"`
	// Options are stored as JSON: numbers come back as float64, and an
	// empty map comes back as nil.
	Options map[string]any `json:"options,omitempty"`
	// Status is "pending", "active", "completed", "stopped" or "failed".
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`

	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	LoadedAt   *time.Time `json:"loaded_at,omitempty"`

	RowsRead        int64 `json:"rows_read"`
	RowsWritten     int64 `json:"rows_written"`
	RowsRemoved     int64 `json:"rows_removed"`
	Bytes           int64 `json:"bytes"`
	Chunks          int64 `json:"chunks"`
	WindowConflicts int64 `json:"window_conflicts"`
	Retries         int64 `json:"retries"`
	// RowsEstimate is the source's estimate, once the run's first chunk
	// was read, of the rows it reads, or the rows it read when that chunk
	// was all (0: unknown): the total of progress bars.
	RowsEstimate int64 `json:"rows_estimate"`
	// RunID is the run the backfill belongs to when several objects were
	// initiated as one run (0: none).
	RunID int64 `json:"run_id,omitempty"`
	// Verify is the verify that ended the backfill (nil: none yet).
	Verify *VerifySummary `json:"verify,omitempty"`
}

// VerifySummary is the verify a backfill ends with: what it covered,
// compared range by range with the source at one point of the stream.
type VerifySummary struct {
	// Status is "running", "match", "differ", "error" or "off" (the
	// stream's backfill.verify is off).
	Status          string     `json:"status"`
	SourceRows      int64      `json:"source_rows"`
	DestRows        int64      `json:"destination_rows"`
	Ranges          int        `json:"ranges"`
	DifferingRanges int        `json:"differing_ranges"`
	Error           string     `json:"error,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
}

func encodeVerify(v *VerifySummary) (string, error) {
	if v == nil {
		return "{}", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode verify: %w", err)
	}
	return string(b), nil
}

func decodeVerify(raw []byte) (*VerifySummary, error) {
	var v VerifySummary
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	if v.Status == "" {
		return nil, nil
	}
	return &v, nil
}

func (b *Backfill) validate() error {
	if b.Stream == "" || b.Schema == "" || b.Table == "" {
		return errors.New("stream, schema and table are required")
	}
	if b.StartedBy == "" {
		return errors.New("started_by is required")
	}
	if !ValidStatus(b.Status) {
		return fmt.Errorf("invalid status %q", b.Status)
	}
	return nil
}

func encodeOptions(opts map[string]any) (string, error) {
	if len(opts) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return "", fmt.Errorf("encode options: %w", err)
	}
	return string(b), nil
}

// CreateBackfill inserts b and sets its ID and CreatedAt. An empty Status
// becomes "pending".
func (s *Store) CreateBackfill(ctx context.Context, b *Backfill) error {
	if b.Status == "" {
		b.Status = StatusPending
	}
	if err := b.validate(); err != nil {
		return fmt.Errorf("create backfill: %w", err)
	}
	opts, err := encodeOptions(b.Options)
	if err != nil {
		return fmt.Errorf("create backfill: %w", err)
	}
	verify, err := encodeVerify(b.Verify)
	if err != nil {
		return fmt.Errorf("create backfill: %w", err)
	}
	created := now()
	id, err := s.insertID(ctx, `INSERT INTO "backfills" (`+backfillInsertCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING "id"`,
		b.Stream, b.Schema, b.Table, b.StartedBy, opts, b.Status, b.Error,
		s.d.timeArg(created), s.d.nullTimeArg(b.StartedAt), s.d.nullTimeArg(b.FinishedAt), s.d.nullTimeArg(b.LoadedAt),
		b.RowsRead, b.RowsWritten, b.RowsRemoved, b.Bytes, b.Chunks, b.WindowConflicts, b.Retries, b.RowsEstimate,
		b.RunID, verify,
	)
	if err != nil {
		return fmt.Errorf("create backfill for %s/%s.%s: %w", b.Stream, b.Schema, b.Table, err)
	}
	b.ID, b.CreatedAt = id, created
	return nil
}

// UpdateBackfill replaces every field of the backfill with b.ID except ID and
// CreatedAt, which never change. It returns ErrNotFound for an unknown ID.
func (s *Store) UpdateBackfill(ctx context.Context, b Backfill) error {
	q, args, err := s.updateBackfillSQL(b)
	if err != nil {
		return err
	}
	res, err := s.exec(ctx, q, args...)
	return backfillUpdated(b.ID, res, err)
}

// updateBackfillSQL is UpdateBackfill's statement and arguments.
func (s *Store) updateBackfillSQL(b Backfill) (string, []any, error) {
	if err := b.validate(); err != nil {
		return "", nil, fmt.Errorf("update backfill %d: %w", b.ID, err)
	}
	opts, err := encodeOptions(b.Options)
	if err != nil {
		return "", nil, fmt.Errorf("update backfill %d: %w", b.ID, err)
	}
	verify, err := encodeVerify(b.Verify)
	if err != nil {
		return "", nil, fmt.Errorf("update backfill %d: %w", b.ID, err)
	}
	return `UPDATE "backfills" SET
		"stream" = ?, "schema_name" = ?, "table_name" = ?, "started_by" = ?, "options" = ?, "status" = ?, "error" = ?,
		"started_at" = ?, "finished_at" = ?, "loaded_at" = ?,
		"rows_read" = ?, "rows_written" = ?, "rows_removed" = ?, "bytes" = ?, "chunks" = ?, "window_conflicts" = ?, "retries" = ?, "rows_estimate" = ?,
		"run_id" = ?, "verify" = ?
		WHERE "id" = ?`, []any{
			b.Stream, b.Schema, b.Table, b.StartedBy, opts, b.Status, b.Error,
			s.d.nullTimeArg(b.StartedAt), s.d.nullTimeArg(b.FinishedAt), s.d.nullTimeArg(b.LoadedAt),
			b.RowsRead, b.RowsWritten, b.RowsRemoved, b.Bytes, b.Chunks, b.WindowConflicts, b.Retries, b.RowsEstimate,
			b.RunID, verify, b.ID}, nil
}

// backfillUpdated is the outcome of UpdateBackfill's statement.
func backfillUpdated(id int64, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("update backfill %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update backfill %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("update backfill %d: %w", id, ErrNotFound)
	}
	return nil
}

const backfillInsertCols = `"stream", "schema_name", "table_name", "started_by", "options", "status", "error",
	"created_at", "started_at", "finished_at", "loaded_at",
	"rows_read", "rows_written", "rows_removed", "bytes", "chunks", "window_conflicts", "retries", "rows_estimate",
	"run_id", "verify"`

const backfillCols = `"id", ` + backfillInsertCols

func scanBackfill(sc interface{ Scan(...any) error }) (Backfill, error) {
	var b Backfill
	var opts, verify []byte
	var created, started, finished, loaded timeCol
	if err := sc.Scan(&b.ID, &b.Stream, &b.Schema, &b.Table, &b.StartedBy, &opts, &b.Status, &b.Error,
		&created, &started, &finished, &loaded,
		&b.RowsRead, &b.RowsWritten, &b.RowsRemoved, &b.Bytes, &b.Chunks, &b.WindowConflicts, &b.Retries, &b.RowsEstimate,
		&b.RunID, &verify); err != nil {
		return Backfill{}, err
	}
	var err error
	if b.Verify, err = decodeVerify(verify); err != nil {
		return Backfill{}, fmt.Errorf("decode verify of backfill %d: %w", b.ID, err)
	}
	if err := json.Unmarshal(opts, &b.Options); err != nil {
		return Backfill{}, fmt.Errorf("decode options of backfill %d: %w", b.ID, err)
	}
	if len(b.Options) == 0 {
		b.Options = nil
	}
	b.CreatedAt = created.T
	b.StartedAt, b.FinishedAt, b.LoadedAt = started.ptr(), finished.ptr(), loaded.ptr()
	return b, nil
}

// GetBackfill returns one backfill, or ErrNotFound.
func (s *Store) GetBackfill(ctx context.Context, id int64) (Backfill, error) {
	b, err := scanBackfill(s.queryRow(ctx, `SELECT `+backfillCols+` FROM "backfills" WHERE "id" = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Backfill{}, fmt.Errorf("get backfill %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Backfill{}, fmt.Errorf("get backfill %d: %w", id, err)
	}
	return b, nil
}

// BackfillFilter selects backfills. Zero fields don't filter.
type BackfillFilter struct {
	Stream, Schema, Table, Status, StartedBy string
	RunID                                    int64
	// Since and Until bound CreatedAt: Since <= CreatedAt < Until.
	Since, Until time.Time
	// Limit caps the result; 0 means DefaultBackfillLimit.
	Limit int
}

// DefaultBackfillLimit is the number of backfills ListBackfills returns when
// the filter's Limit is 0.
const DefaultBackfillLimit = 1000

// ListBackfills returns the matching backfills, newest (highest ID) first.
func (s *Store) ListBackfills(ctx context.Context, f BackfillFilter) ([]Backfill, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list backfills: negative limit %d", f.Limit)
	}
	var where []string
	var args []any
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+` = ?`)
			args = append(args, v)
		}
	}
	eq(`"stream"`, f.Stream)
	eq(`"schema_name"`, f.Schema)
	eq(`"table_name"`, f.Table)
	eq(`"status"`, f.Status)
	eq(`"started_by"`, f.StartedBy)
	if f.RunID != 0 {
		where = append(where, `"run_id" = ?`)
		args = append(args, f.RunID)
	}
	// Stored times are whole microseconds, so rounding a bound up to the
	// next microsecond keeps both comparisons exact.
	if !f.Since.IsZero() {
		where = append(where, `"created_at" >= ?`)
		args = append(args, s.d.timeArg(ceilMicro(f.Since)))
	}
	if !f.Until.IsZero() {
		where = append(where, `"created_at" < ?`)
		args = append(args, s.d.timeArg(ceilMicro(f.Until)))
	}
	q := `SELECT ` + backfillCols + ` FROM "backfills"`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultBackfillLimit
	}
	q += ` ORDER BY "id" DESC LIMIT ?`
	args = append(args, limit)

	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list backfills: %w", err)
	}
	defer rows.Close()
	var out []Backfill
	for rows.Next() {
		b, err := scanBackfill(rows)
		if err != nil {
			return nil, fmt.Errorf("list backfills: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list backfills: %w", err)
	}
	return out, nil
}

// ceilMicro rounds t up to a whole microsecond.
func ceilMicro(t time.Time) time.Time {
	if tr := t.Truncate(time.Microsecond); !tr.Equal(t) {
		return tr.Add(time.Microsecond)
	}
	return t
}
