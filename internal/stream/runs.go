package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
)

// RunStatus is the status of a run (several backfills initiated as one)
// from its members': pending while all are pending, active while any is
// pending or active, and once all have ended completed when all completed,
// else failed if any failed, else stopped. A run without members (the
// daemon stopped before recording the first) has failed.
func RunStatus(members []store.Backfill) string {
	if len(members) == 0 {
		return StatusFailed
	}
	n := map[string]int{}
	for _, b := range members {
		n[b.Status]++
	}
	switch {
	case n[StatusPending] == len(members):
		return StatusPending
	case n[StatusPending]+n[StatusActive] > 0:
		return StatusActive
	case n[StatusFailed] > 0:
		return StatusFailed
	case n[StatusStopped] > 0:
		return StatusStopped
	}
	return StatusCompleted
}

// RunView is a run: its record, its status and totals derived from its
// members, and the members oldest first. The API answers it as its own
// api.RunView.
type RunView struct {
	ID        int64     `json:"id"`
	Stream    string    `json:"stream"`
	StartedBy string    `json:"started_by"`
	CreatedAt time.Time `json:"created_at"`
	Status    string    `json:"status"`
	// Error joins the members' errors, each as "schema.table: error".
	Error        string `json:"error,omitempty"`
	RowsRead     int64  `json:"rows_read"`
	RowsWritten  int64  `json:"rows_written"`
	Bytes        int64  `json:"bytes"`
	RowsEstimate int64  `json:"rows_estimate"`
	// StartedAt is the earliest member's start; FinishedAt the latest
	// member's finish, once the run has ended.
	StartedAt  *time.Time       `json:"started_at,omitempty"`
	FinishedAt *time.Time       `json:"finished_at,omitempty"`
	Backfills  []store.Backfill `json:"backfills"`
}

// runEnded says whether a run in status s has ended.
// RunEnded reports whether a backfill's status is final: completed,
// stopped or failed.
func RunEnded(s string) bool {
	return s == StatusCompleted || s == StatusStopped || s == StatusFailed
}

func newRunView(r store.Run, members []store.Backfill) RunView {
	v := RunView{ID: r.ID, Stream: r.Stream, StartedBy: r.StartedBy, CreatedAt: r.CreatedAt,
		Status: RunStatus(members), Backfills: members}
	if v.Backfills == nil {
		v.Backfills = []store.Backfill{}
	}
	var errs []string
	var finished *time.Time
	for _, b := range members {
		v.RowsRead += b.RowsRead
		v.RowsWritten += b.RowsWritten
		v.Bytes += b.Bytes
		v.RowsEstimate += b.RowsEstimate
		if b.StartedAt != nil && (v.StartedAt == nil || b.StartedAt.Before(*v.StartedAt)) {
			v.StartedAt = b.StartedAt
		}
		if b.FinishedAt != nil && (finished == nil || b.FinishedAt.After(*finished)) {
			finished = b.FinishedAt
		}
		if b.Error != "" {
			errs = append(errs, config.FormatTable(change.TableID{Schema: b.Schema, Name: b.Table})+": "+b.Error)
		}
	}
	if len(members) == 0 {
		errs = append(errs, "no backfill of the run was recorded")
	}
	v.Error = strings.Join(errs, "; ")
	if RunEnded(v.Status) {
		v.FinishedAt = finished
	}
	return v
}

// GetRun returns one of the stream's runs; ErrNotFound when there is no
// such run or it is another stream's.
func (s *Stream) GetRun(ctx context.Context, id int64) (RunView, error) {
	r, members, err := s.st.GetRun(ctx, id)
	if err != nil {
		return RunView{}, err
	}
	if r.Stream != s.cfg.Name {
		return RunView{}, fmt.Errorf("run %d is not of stream %s: %w", id, s.cfg.Name, store.ErrNotFound)
	}
	return newRunView(r, members), nil
}

// StopRun stops the members of a run still pending or active, through the
// objects' stop, and returns the run as it is then. A run with none left is
// refused.
func (s *Stream) StopRun(ctx context.Context, id int64) (RunView, error) {
	// A member may end between reading the run and stopping its object,
	// which refuses the stop as a whole: read the run again and retry.
	for attempt := 1; ; attempt++ {
		v, err := s.GetRun(ctx, id)
		if err != nil {
			return RunView{}, err
		}
		ids, err := s.runningMembers(ctx, v.Backfills)
		if err != nil {
			return RunView{}, fmt.Errorf("stop run %d: %w", id, err)
		}
		if len(ids) == 0 {
			return RunView{}, &RefusedError{Msg: fmt.Sprintf("cannot stop run %d: it has ended, %s", id, v.Status)}
		}
		err = s.bf.stop(ctx, ids)
		var refused *RefusedError
		switch {
		case err == nil:
			return s.GetRun(ctx, id)
		case errors.As(err, &refused) && attempt < 3:
			continue
		case refused != nil:
			return RunView{}, err
		}
		return RunView{}, fmt.Errorf("stop run %d: %w", id, err)
	}
}

// runningMembers are the objects whose pending or active backfill is one of
// members: an object backfilled again after its member ended is left alone.
func (s *Stream) runningMembers(ctx context.Context, members []store.Backfill) ([]change.TableID, error) {
	var ids []change.TableID
	for _, b := range members {
		if b.Status != StatusPending && b.Status != StatusActive {
			continue
		}
		o, err := s.st.GetObject(ctx, s.cfg.Name, b.Schema, b.Table)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if o.BackfillID == b.ID {
			ids = append(ids, change.TableID{Schema: b.Schema, Name: b.Table})
		}
	}
	return ids, nil
}
