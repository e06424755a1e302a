package mysql

import (
	"errors"
	"fmt"

	pingcap "github.com/pingcap/errors"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// ErrPositionPurged is returned by Stream when the server no longer has
// the binlog file the stream must resume from: the changes since are lost
// to it, and the stream must be reset (`tidemark stream reset`: every
// table backfilled again).
var ErrPositionPurged = errors.New("the binlog position is no longer on the server (purged)")

// classifyStream marks the server's "cannot read the binlog at this
// position" error (1236, ER_MASTER_FATAL_ERROR_READING_BINLOG: the file
// was purged, or the position is not in it) as ErrPositionPurged.
func classifyStream(err error, at string) error {
	var my *gomysql.MyError
	if errors.As(err, &my) || errors.As(pingcap.Cause(err), &my) {
		if my.Code == gomysql.ER_MASTER_FATAL_ERROR_READING_BINLOG {
			return fmt.Errorf("read the binlog at %s: %w: %s; run `tidemark stream reset` to start over with full backfills, and keep binlogs longer (binlog_expire_logs_seconds)", at, ErrPositionPurged, my.Message)
		}
	}
	return fmt.Errorf("read the binlog after %s: %w", at, err)
}
