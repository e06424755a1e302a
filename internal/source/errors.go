package source

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoKey means a table has no usable row key.
var ErrNoKey = errors.New("no usable row key")

// ErrGeneratedKey means a table's key has a generated column, which the
// log leaves out of every change: it is an ErrNoKey.
var ErrGeneratedKey = fmt.Errorf("%w: a key column is generated", ErrNoKey)

// ErrFilter means the source refused a backfill's filter.
var ErrFilter = errors.New("the source refused the filter")

// ErrNoTable is a table the source does not have (or the user cannot see).
var ErrNoTable = errors.New("no such table on the source")

// ErrNotInSnapshot means a table cannot be read in an exported snapshot:
// it changed since in a way the snapshot does not show (its storage was
// rewritten, it did not exist yet or was attached as a partition since),
// or the snapshot is gone. It is read outside the snapshot.
var ErrNotInSnapshot = errors.New("the table cannot be read in the exported snapshot")

// PermanentError is a source error that retrying cannot cure: a person has
// to act. Hint says what to do.
type PermanentError struct {
	Err  error
	Hint string
}

func (e *PermanentError) Error() string { return e.Err.Error() + ": " + e.Hint }
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err needs a person (log gone, permission
// missing, wrong settings) rather than a retry (connection lost, server
// restarting).
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// StatementTimeoutError is a read the source cancelled because it ran
// longer than the statement timeout (ReadTimeouts.Statement).
type StatementTimeoutError struct {
	Err     error
	Timeout time.Duration
}

func (e *StatementTimeoutError) Error() string {
	return fmt.Sprintf("%v (the read ran longer than the statement timeout, %s)", e.Err, e.Timeout)
}

func (e *StatementTimeoutError) Unwrap() error { return e.Err }

// IsStatementTimeout reports whether err is a read that ran into the
// statement timeout.
func IsStatementTimeout(err error) bool {
	var te *StatementTimeoutError
	return errors.As(err, &te)
}
