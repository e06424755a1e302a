package doctor

import (
	"context"
	"fmt"
	"time"
)

// maxSkew is the clock difference above which the clock check warns.
const maxSkew = 2 * time.Second

// clock compares the local clock with the source server's. The server's
// time is taken half way through the round trip.
func (src *source) clock(ctx context.Context) Check {
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

// clockCheck judges the skew between a server's clock and the local one,
// read rtt apart.
func clockCheck(name string, server, local time.Time, rtt time.Duration) Check {
	skew := server.Sub(local)
	ahead := "ahead of"
	if skew < 0 {
		skew, ahead = -skew, "behind"
	}
	detail := fmt.Sprintf("the server's clock is %s %s this host's (round trip %s)", skew.Round(time.Millisecond), ahead, rtt.Round(time.Millisecond))
	if skew > maxSkew {
		return warn(name, detail+fmt.Sprintf("; more than %s skews time-based schedules and lag figures", maxSkew),
			"synchronise both clocks with NTP (chrony or systemd-timesyncd; check with timedatectl or chronyc tracking)")
	}
	return ok(name, detail)
}
