package pg

import "github.com/tidemark/tidemark/internal/doctor/check"

// Check is the outcome of one of the source's checks.
type Check = check.Check

// The statuses and the shared wording and connection helpers, under the
// names the checks use.
const (
	OK      = check.OK
	Warn    = check.Warn
	Fail    = check.Fail
	Timeout = check.Timeout
)

var (
	ok         = check.Passed
	warn       = check.Warned
	fail       = check.Failed
	errText    = check.ErrText
	list       = check.List
	plural     = check.Plural
	connect    = check.ConnectPostgres
	closeConn  = check.ClosePostgres
	connectFix = check.PostgresConnectFix
	where      = check.Where
	clockCheck = check.Clock
	bytesText  = check.BytesText
)

// Status is a check's outcome.
type Status = check.Status
