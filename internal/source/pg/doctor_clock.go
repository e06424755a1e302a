package pg

import (
	"context"
	"time"
)

// clock compares the local clock with the source server's. The server's
// time is taken half way through the round trip.
func (src *sourceCheck) clock(ctx context.Context) Check {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var server time.Time
	before := time.Now()
	if err := src.conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&server); err != nil {
		return fail(src.name("clock"), "cannot read the server's clock: "+errText(err), "")
	}
	after := time.Now()
	return clockCheck(src.name("clock"), server, before.Add(after.Sub(before)/2), after.Sub(before))
}
