package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Proposal states.
const (
	ProposalPending   = "pending"
	ProposalSubmitted = "submitted"
	ProposalDismissed = "dismissed"
)

// ErrProposalDecided is a proposal that is no longer pending.
var ErrProposalDecided = errors.New("the proposal is no longer pending")

// Proposal is a proposal to re-run a task's past cycles whose rows
// backfills changed (docs/lineage.md).
type Proposal struct {
	ID    int64  `json:"id"`
	Task  string `json:"task"`
	State string `json:"state"`
	// Auto: tidemark submits it once due (the task's on_change is run).
	Auto bool `json:"auto"`
	// Times are the cycles' business times, UTC, ascending.
	Times  []time.Time `json:"times"`
	Causes []Cause     `json:"causes"`
	// Note says why an automatic proposal waits for a person (the day's
	// cap reached).
	Note      string    `json:"note,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// DueAt is when it settles: its last change plus the task's settle.
	DueAt           time.Time `json:"due_at"`
	BatchBackfillID int64     `json:"batch_backfill_id,omitempty"`
	DecidedBy       string    `json:"decided_by,omitempty"`
}

// Cause is a stream backfill whose changes a proposal holds.
type Cause struct {
	Stream     string `json:"stream"`
	BackfillID int64  `json:"backfill_id"`
	Object     string `json:"object"`
	StartedBy  string `json:"started_by"`
}

// ProposalAdd is what one stream backfill adds to a task's proposal.
type ProposalAdd struct {
	Task  string
	Auto  bool
	Times []time.Time
	Cause Cause
	DueAt time.Time
}

// endedSettle is how long after a stopped or failed backfill ended its
// changed dates are handed over: a batch of its chunks still in the writer
// commits (or is dropped) well within it.
const endedSettle = time.Minute

// UnhandledChanged returns the ended stream backfills with changed dates
// that no proposal has taken in yet, oldest first.
func (s *Store) UnhandledChanged(ctx context.Context) ([]int64, error) {
	// By backfill, each probe a seek on changed_dates' key (stream,
	// backfill_id, …): the watcher asks every second, and changed_dates
	// grows with every backfill.
	// A completed backfill is over once its last chunk is committed (it is
	// loaded); a stopped or failed one once a batch still in the writer
	// had time to commit.
	rows, err := s.query(ctx, `SELECT b."id" FROM "backfills" b
		WHERE (b."status" = ? AND b."loaded_at" IS NOT NULL OR b."status" IN (?, ?) AND b."finished_at" < ?)
		  AND NOT EXISTS (SELECT 1 FROM "lineage_handled" h WHERE h."backfill_id" = b."id")
		  AND EXISTS (SELECT 1 FROM "changed_dates" c WHERE c."stream" = b."stream" AND c."backfill_id" = b."id")
		ORDER BY 1`, StatusCompleted, StatusStopped, StatusFailed, s.d.timeArg(now().Add(-endedSettle)))
	if err != nil {
		return nil, fmt.Errorf("find unhandled changed dates: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// HandleChanged records, in one transaction, that backfill id was handled
// and merges adds into their tasks' pending proposals (a new one when a
// task has none): times and causes are joined, the due time moves to the
// latest, and a proposal becomes automatic when an addition is, unless it
// was held for a person.
func (s *Store) HandleChanged(ctx context.Context, id int64, adds []ProposalAdd) error {
	at := now()
	return s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "lineage_handled" ("backfill_id", "at") VALUES (?, ?) ON CONFLICT DO NOTHING`), id, s.d.timeArg(at))
		if err != nil {
			return fmt.Errorf("mark backfill %d handled: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // handled already
		}
		for _, a := range adds {
			if err := s.mergeProposal(ctx, tx, a, at); err != nil {
				return fmt.Errorf("propose %s: %w", a.Task, err)
			}
		}
		return nil
	})
}

// HandleLate deletes the late dates ids and merges adds into their tasks'
// pending proposals, in one transaction (see HandleChanged).
func (s *Store) HandleLate(ctx context.Context, ids []int64, adds []ProposalAdd) error {
	at := now()
	return s.batchWriteTx(ctx, false, func(tx *sql.Tx) error {
		for start := 0; start < len(ids); start += changedDatesPerInsert {
			part := ids[start:min(start+changedDatesPerInsert, len(ids))]
			args := make([]any, len(part))
			for i, id := range part {
				args[i] = id
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM "late_dates" WHERE "id" IN (`+batchInList(len(part))+`)`), args...); err != nil {
				return fmt.Errorf("hand late dates over: %w", err)
			}
		}
		for _, a := range adds {
			if err := s.mergeProposal(ctx, tx, a, at); err != nil {
				return fmt.Errorf("propose %s: %w", a.Task, err)
			}
		}
		return nil
	})
}

func (s *Store) mergeProposal(ctx context.Context, tx *sql.Tx, a ProposalAdd, at time.Time) error {
	var (
		id                  int64
		times, causes, note string
		auto                bool
		due                 timeCol
	)
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT "id", "times", "causes", "auto", "note", "due_at" FROM "lineage_proposals"
		WHERE "task" = ? AND "state" = ? ORDER BY "id" DESC LIMIT 1`), a.Task, ProposalPending).Scan(&id, &times, &causes, &auto, &note, &due)
	if errors.Is(err, sql.ErrNoRows) {
		ts, cs, err := encodeProposal(a.Times, []Cause{a.Cause})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.d.rebind(`INSERT INTO "lineage_proposals"
			("task", "state", "auto", "times", "causes", "created_at", "updated_at", "due_at") VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			a.Task, ProposalPending, a.Auto, ts, cs, s.d.timeArg(at), s.d.timeArg(at), s.d.timeArg(normTime(a.DueAt)))
		return err
	}
	if err != nil {
		return err
	}
	var p Proposal
	if err := decodeProposal(&p, times, causes); err != nil {
		return err
	}
	for _, t := range a.Times {
		if !slices.ContainsFunc(p.Times, t.Equal) {
			p.Times = append(p.Times, t)
		}
	}
	slices.SortFunc(p.Times, time.Time.Compare)
	if !slices.Contains(p.Causes, a.Cause) {
		p.Causes = append(p.Causes, a.Cause)
	}
	ts, cs, err := encodeProposal(p.Times, p.Causes)
	if err != nil {
		return err
	}
	dueAt := normTime(a.DueAt)
	if due.T.After(dueAt) {
		dueAt = due.T
	}
	_, err = tx.ExecContext(ctx, s.d.rebind(`UPDATE "lineage_proposals" SET "times" = ?, "causes" = ?, "auto" = ?, "updated_at" = ?, "due_at" = ?
		WHERE "id" = ?`), ts, cs, auto || a.Auto && note == "", s.d.timeArg(at), s.d.timeArg(dueAt), id) // a held one stays held
	return err
}

func encodeProposal(times []time.Time, causes []Cause) (string, string, error) {
	utc := make([]time.Time, len(times))
	for i, t := range times {
		utc[i] = t.UTC()
	}
	ts, err := json.Marshal(utc)
	if err != nil {
		return "", "", err
	}
	cs, err := json.Marshal(causes)
	return string(ts), string(cs), err
}

func decodeProposal(p *Proposal, times, causes string) error {
	if err := json.Unmarshal([]byte(times), &p.Times); err != nil {
		return fmt.Errorf("proposal %d times: %w", p.ID, err)
	}
	if err := json.Unmarshal([]byte(causes), &p.Causes); err != nil {
		return fmt.Errorf("proposal %d causes: %w", p.ID, err)
	}
	return nil
}

const proposalColumns = `"id", "task", "state", "auto", "times", "causes", "note", "created_at", "updated_at", "due_at", "batch_backfill_id", "decided_by"`

func (s *Store) scanProposals(rows *sql.Rows) ([]Proposal, error) {
	defer rows.Close()
	var out []Proposal
	for rows.Next() {
		var (
			p                     Proposal
			times, causes         string
			created, updated, due timeCol
		)
		if err := rows.Scan(&p.ID, &p.Task, &p.State, &p.Auto, &times, &causes, &p.Note, &created, &updated, &due, &p.BatchBackfillID, &p.DecidedBy); err != nil {
			return nil, err
		}
		if err := decodeProposal(&p, times, causes); err != nil {
			return nil, err
		}
		p.CreatedAt, p.UpdatedAt, p.DueAt = created.T, updated.T, due.T
		out = append(out, p)
	}
	return out, rows.Err()
}

// ListProposals returns proposals newest first, those in state only when
// it is not "".
func (s *Store) ListProposals(ctx context.Context, state string, limit int) ([]Proposal, error) {
	if limit <= 0 {
		limit = DefaultBackfillLimit
	}
	q, args := `SELECT `+proposalColumns+` FROM "lineage_proposals"`, []any{}
	if state != "" {
		q, args = q+` WHERE "state" = ?`, append(args, state)
	}
	rows, err := s.query(ctx, q+` ORDER BY "id" DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list proposals: %w", err)
	}
	return s.scanProposals(rows)
}

// GetProposal returns one proposal, or ErrNotFound.
func (s *Store) GetProposal(ctx context.Context, id int64) (Proposal, error) {
	rows, err := s.query(ctx, `SELECT `+proposalColumns+` FROM "lineage_proposals" WHERE "id" = ?`, id)
	if err != nil {
		return Proposal{}, fmt.Errorf("get proposal %d: %w", id, err)
	}
	ps, err := s.scanProposals(rows)
	if err != nil {
		return Proposal{}, fmt.Errorf("get proposal %d: %w", id, err)
	}
	if len(ps) == 0 {
		return Proposal{}, fmt.Errorf("get proposal %d: %w", id, ErrNotFound)
	}
	return ps[0], nil
}

// DueProposals returns the pending automatic proposals due by t, oldest
// first.
func (s *Store) DueProposals(ctx context.Context, t time.Time) ([]Proposal, error) {
	rows, err := s.query(ctx, `SELECT `+proposalColumns+` FROM "lineage_proposals"
		WHERE "state" = ? AND "auto" = ? AND "due_at" <= ? ORDER BY "id"`, ProposalPending, true, s.d.timeArg(normTime(t)))
	if err != nil {
		return nil, fmt.Errorf("due proposals: %w", err)
	}
	return s.scanProposals(rows)
}

// DecideProposal moves a pending proposal to state (submitted, with its
// batch backfill, or dismissed), recording who decided and when (at, on
// the decider's clock: the day's cap counts by it); a proposal no longer
// pending is ErrProposalDecided.
func (s *Store) DecideProposal(ctx context.Context, id int64, state string, batchID int64, by string, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE "lineage_proposals" SET "state" = ?, "batch_backfill_id" = ?, "decided_by" = ?, "updated_at" = ?
		WHERE "id" = ? AND "state" = ?`, state, batchID, by, s.d.timeArg(normTime(at)), id, ProposalPending)
	if err != nil {
		return fmt.Errorf("decide proposal %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.GetProposal(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("proposal %d: %w", id, ErrProposalDecided)
	}
	return nil
}

// HoldProposal keeps an automatic proposal for a person to decide, saying
// why.
func (s *Store) HoldProposal(ctx context.Context, id int64, note string) error {
	_, err := s.exec(ctx, `UPDATE "lineage_proposals" SET "auto" = ?, "note" = ?, "updated_at" = ? WHERE "id" = ? AND "state" = ?`,
		false, note, s.d.timeArg(now()), id, ProposalPending)
	if err != nil {
		return fmt.Errorf("hold proposal %d: %w", id, err)
	}
	return nil
}

// SubmittedSince counts the proposals of task submitted by decidedBy at
// or after t.
func (s *Store) SubmittedSince(ctx context.Context, task, decidedBy string, t time.Time) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT COUNT(*) FROM "lineage_proposals" WHERE "task" = ? AND "state" = ? AND "decided_by" = ? AND "updated_at" >= ?`,
		task, ProposalSubmitted, decidedBy, s.d.timeArg(normTime(t))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count proposals of %s: %w", task, err)
	}
	return n, nil
}

// ProposalsCausedBy returns the proposals holding the changes of stream
// backfill id, oldest first, and whether its changes were handed over.
func (s *Store) ProposalsCausedBy(ctx context.Context, id int64) ([]Proposal, bool, error) {
	var n int
	if err := s.queryRow(ctx, `SELECT COUNT(*) FROM "lineage_handled" WHERE "backfill_id" = ?`, id).Scan(&n); err != nil {
		return nil, false, fmt.Errorf("proposals of backfill %d: %w", id, err)
	}
	// Causes are JSON written by encodeProposal: the id is followed by a
	// comma, so 1 does not match 12.
	rows, err := s.query(ctx, `SELECT `+proposalColumns+` FROM "lineage_proposals" WHERE "causes" LIKE ? ORDER BY "id"`,
		fmt.Sprintf(`%%"backfill_id":%d,%%`, id))
	if err != nil {
		return nil, false, fmt.Errorf("proposals of backfill %d: %w", id, err)
	}
	ps, err := s.scanProposals(rows)
	return ps, n > 0, err
}

// ProposalOfBatch returns the proposal batch backfill id was submitted
// for; ok is false for one submitted otherwise.
func (s *Store) ProposalOfBatch(ctx context.Context, id int64) (p Proposal, ok bool, err error) {
	rows, err := s.query(ctx, `SELECT `+proposalColumns+` FROM "lineage_proposals" WHERE "batch_backfill_id" = ? ORDER BY "id" LIMIT 1`, id)
	if err != nil {
		return p, false, fmt.Errorf("proposal of batch backfill %d: %w", id, err)
	}
	ps, err := s.scanProposals(rows)
	if err != nil || len(ps) == 0 {
		return p, false, err
	}
	return ps[0], true, nil
}
