// Package check is what every prerequisite check shares: the outcome of a
// check, its constructors and the wording helpers. The checks of each source
// type live with the source (its registry entry's Doctor); package doctor
// runs them with the metadata store's, destinations' and tasks' checks.
package check

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is the outcome of a check.
type Status string

// Statuses. A WARN deserves a look; a FAIL keeps tidemark from working.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is the outcome of one check: what was found and, for WARN and FAIL,
// how to fix it (SQL to run or a configuration change).
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Timeout bounds each check's network and disk operations.
const Timeout = 5 * time.Second

// Passed is an OK check.
func Passed(name, detail string) Check { return Check{Name: name, Status: OK, Detail: detail} }

// Warned is a WARN check with its fix.
func Warned(name, detail, fix string) Check {
	return Check{Name: name, Status: Warn, Detail: detail, Fix: fix}
}

// Failed is a FAIL check with its fix.
func Failed(name, detail, fix string) Check {
	return Check{Name: name, Status: Fail, Detail: detail, Fix: fix}
}

// ErrText renders an error on one line. pgx puts each attempt (address,
// TLS then plain) on a line of its own, often the same line twice.
func ErrText(err error) string {
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line != "" && !slices.Contains(parts, line) {
			parts = append(parts, line)
		}
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			sep := "; "
			if strings.HasSuffix(parts[i-1], ":") {
				sep = " "
			}
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return b.String()
}

// List joins at most max items, saying how many more there are.
func List(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}

// Plural picks the word for n.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// BytesText renders a byte count in binary units.
func BytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// maxSkew is the clock difference above which the clock check warns.
const maxSkew = 2 * time.Second

// Clock judges the skew between a server's clock and the local one, read
// rtt apart.
func Clock(name string, server, local time.Time, rtt time.Duration) Check {
	skew := server.Sub(local)
	ahead := "ahead of"
	if skew < 0 {
		skew, ahead = -skew, "behind"
	}
	detail := fmt.Sprintf("the server's clock is %s %s this host's (round trip %s)", skew.Round(time.Millisecond), ahead, rtt.Round(time.Millisecond))
	if skew > maxSkew {
		return Warned(name, detail+fmt.Sprintf("; more than %s skews time-based schedules and lag figures", maxSkew),
			"synchronise both clocks with NTP (chrony or systemd-timesyncd; check with timedatectl or chronyc tracking)")
	}
	return Passed(name, detail)
}
