package stream

import (
	"fmt"

	"github.com/tidemark/tidemark/internal/store"
)

// Object backfill statuses, as the store keeps them. The empty status is
// shown as "-".
const (
	StatusNone      = store.StatusNone
	StatusPending   = store.StatusPending
	StatusActive    = store.StatusActive
	StatusCompleted = store.StatusCompleted
	StatusStopped   = store.StatusStopped
	StatusFailed    = store.StatusFailed
)

// Reasons an object has no backfill status.
const (
	ReasonNotStarted = "the stream has not started"
	ReasonManual     = "manual backfill mode: initiate a backfill to copy the existing rows"
	ReasonExcluded   = "excluded from automatic backfill"
	ReasonFuture     = "table added after the stream started, with no automatic backfill (manual mode or backfill.exclude): initiate a backfill to copy the rows it held before it was streamed"
	// ReasonDiscovered is shown for the moment between finding a table
	// after the stream's first start and initiating the backfill that
	// copies its rows (started by "discovery").
	ReasonDiscovered = "table added after the stream started: its rows are copied by a backfill started by discovery"
)

// CanInitiate says whether a backfill may start on an object in status s.
func CanInitiate(object, s string) error {
	if s == StatusPending || s == StatusActive {
		return &RefusedError{Msg: fmt.Sprintf("cannot initiate a backfill of %s: its backfill is %s; stop it first or wait for it to finish", object, s)}
	}
	return nil
}

// CanStop says whether an object's backfill in status s may be stopped.
func CanStop(object, s string) error {
	switch s {
	case StatusPending, StatusActive:
		return nil
	case StatusNone:
		return &RefusedError{Msg: fmt.Sprintf("cannot stop the backfill of %s: it has none running", object)}
	}
	return &RefusedError{Msg: fmt.Sprintf("cannot stop the backfill of %s: it is already %s", object, s)}
}

// RefusedError is an action the object's status does not allow.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }
