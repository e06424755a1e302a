package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Action is one request that changed something through the API, as the
// audit trail shows it beside the backfills.
type Action struct {
	ID  int64     `json:"id"`
	At  time.Time `json:"at"`
	Who string    `json:"who"` // as started_by records it: "cli:ops", "api", …
	// Action names what was asked, as the route reads: "POST
	// /api/v1/streams/{stream}/pause".
	Action string `json:"action"`
	Path   string `json:"path"`   // the request's path, the names it targets
	Status int    `json:"status"` // the HTTP status it was answered with
	// Detail is the request's body, compact and cut at MaxActionDetail
	// bytes; "" when it had none.
	Detail string `json:"detail"`
}

// MaxActionDetail bounds the body an action records.
const MaxActionDetail = 2048

// ActionFilter selects actions; zero fields select all.
type ActionFilter struct {
	Who          string
	Since, Until time.Time
	Limit        int // 0: DefaultBackfillLimit
}

// RecordAction inserts a and sets its ID and At.
func (s *Store) RecordAction(ctx context.Context, a *Action) error {
	if a.Who == "" || a.Action == "" {
		return errors.New("record action: who and action are required")
	}
	if len(a.Detail) > MaxActionDetail {
		a.Detail = a.Detail[:MaxActionDetail]
	}
	at := now()
	err := s.queryRow(ctx, `INSERT INTO "audit_actions" ("at", "who", "action", "path", "status", "detail")
		VALUES (?, ?, ?, ?, ?, ?) RETURNING "id"`,
		s.d.timeArg(at), a.Who, a.Action, a.Path, a.Status, a.Detail).Scan(&a.ID)
	if err != nil {
		return fmt.Errorf("record action %s: %w", a.Action, err)
	}
	a.At = at
	return nil
}

// ListActions returns actions newest first.
func (s *Store) ListActions(ctx context.Context, f ActionFilter) ([]Action, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("list actions: negative limit %d", f.Limit)
	}
	var where []string
	var args []any
	if f.Who != "" {
		where, args = append(where, `"who" = ?`), append(args, f.Who)
	}
	if !f.Since.IsZero() {
		where, args = append(where, `"at" >= ?`), append(args, s.d.timeArg(ceilMicro(f.Since)))
	}
	if !f.Until.IsZero() {
		where, args = append(where, `"at" < ?`), append(args, s.d.timeArg(ceilMicro(f.Until)))
	}
	q := `SELECT "id", "at", "who", "action", "path", "status", "detail" FROM "audit_actions"`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultBackfillLimit
	}
	q += ` ORDER BY "id" DESC LIMIT ?`
	rows, err := s.query(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	defer rows.Close()
	var out []Action
	for rows.Next() {
		var a Action
		var at timeCol
		if err := rows.Scan(&a.ID, &at, &a.Who, &a.Action, &a.Path, &a.Status, &a.Detail); err != nil {
			return nil, fmt.Errorf("list actions: %w", err)
		}
		a.At = at.T
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	return out, nil
}
