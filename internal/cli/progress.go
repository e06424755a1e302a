package cli

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// progressItem is one line of progress in a snapshot: an object's backfill,
// or a batch backfill's concurrency group.
type progressItem struct {
	Key    string   // identifies the item from one snapshot to the next
	Label  string   // "backfill 3 of public.orders", "group 2"
	Done   int64    // rows written, instances ended
	Total  int64    // what Done goes up to; 0 when unknown (no bar, no ETA)
	Unit   string   // what Done counts: "rows written", "ended"
	Rate   string   // what the rate counts: "rows", "instances"
	Detail []string // more figures: "30 read", "6 chunks", "1 running"
	Status string
	Ended  bool // no rate or ETA any more
}

// progress renders snapshots of items. On a terminal (tty) every item has a
// line, redrawn in place; otherwise an item gets a plain, timestamped line
// when it first shows, when its status changes, and when it has progressed
// by a tenth of its total (or, when the total is unknown, by every interval
// that it progressed in at most).
type progress struct {
	w        io.Writer
	tty      bool
	now      func() time.Time
	window   time.Duration // rates are over this sliding window
	every    time.Duration // plain: at most one progress line per item this often when the total is unknown
	redraw   time.Duration // tty: at most one redraw this often, unless the lines are not the same items
	barWidth int
	width    int // tty: the terminal's columns; lines are cut to fit (0: not cut)

	drawn    int // tty: lines the last redraw wrote
	lastDraw time.Time
	items    map[string]*itemState
}

type itemState struct {
	samples []sample // (time, done), oldest first, spanning the window

	status  string    // plain: the status in the last line
	printed time.Time // plain: when the last line was printed
	done    int64     // plain: Done in the last line
	step    int64     // plain: tenths of the total in the last line
}

type sample struct {
	t    time.Time
	done int64
}

func newProgress(w io.Writer, tty bool) *progress {
	return &progress{w: w, tty: tty, now: time.Now, window: 10 * time.Second, every: 10 * time.Second,
		redraw: 200 * time.Millisecond, barWidth: 20, items: map[string]*itemState{}}
}

// update takes a snapshot: it records progress for rates and shows what
// changed (on a terminal, at most every redraw interval: callers update
// on events and on a clock tick, and call final at the end).
func (p *progress) update(items []progressItem) { p.show(items, false) }

// final shows the last snapshot whatever the time since the previous one.
func (p *progress) final(items []progressItem) { p.show(items, true) }

func (p *progress) show(items []progressItem, force bool) {
	now := p.now()
	// The display goes to the raw output (it draws with escapes of its
	// own): the texts from the daemon are filtered here.
	items = slices.Clone(items)
	for i := range items {
		it := &items[i]
		it.Label, it.Status = oneLine(safeText(it.Label)), oneLine(safeText(it.Status))
		it.Detail = slices.Clone(it.Detail)
		for j, d := range it.Detail {
			it.Detail[j] = oneLine(safeText(d))
		}
	}
	changed := len(items) != p.drawn // new items, or items gone
	for _, it := range items {
		st := p.items[it.Key]
		if st == nil {
			st = &itemState{step: -1}
			p.items[it.Key] = st
		}
		st.record(now, it.Done, p.window)
	}
	if !p.tty {
		p.plain(now, items)
		return
	}
	if !force && !changed && now.Sub(p.lastDraw) < p.redraw {
		return
	}
	p.lastDraw = now
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\033[%dA", p.drawn) // back to the first line drawn
	}
	labels := 0
	for _, it := range items {
		labels = max(labels, utf8.RuneCountInString(it.Label))
	}
	for _, it := range items {
		st := p.items[it.Key]
		b.WriteString("\r\033[K")
		b.WriteString(p.cut(p.line(it, st, now, labels)))
		b.WriteByte('\n')
	}
	if p.drawn > len(items) {
		b.WriteString("\033[J") // erase the lines no longer drawn
	}
	p.drawn = len(items)
	io.WriteString(p.w, b.String())
}

// plain prints the lines of the items that changed enough.
func (p *progress) plain(now time.Time, items []progressItem) {
	for _, it := range items {
		st := p.items[it.Key]
		var step int64
		if it.Total > 0 {
			step = min(it.Done, it.Total) * 10 / it.Total
		}
		due := st.status != it.Status || st.printed.IsZero()
		if !due && it.Done != st.done && !it.Ended {
			if it.Total > 0 {
				due = step > st.step
			} else {
				due = now.Sub(st.printed) >= p.every
			}
		}
		if !due {
			continue
		}
		st.status, st.printed, st.done, st.step = it.Status, now, it.Done, step
		parts := []string{it.Status, p.count(it)}
		parts = append(parts, it.Detail...)
		parts = append(parts, p.speed(it, st, now)...)
		fmt.Fprintf(p.w, "%s %s: %s\n", now.Format(time.TimeOnly), it.Label, strings.Join(nonEmpty(parts), ", "))
	}
}

// line is an item's line on a terminal: label, bar, counts, rate, ETA, status.
func (p *progress) line(it progressItem, st *itemState, now time.Time, labels int) string {
	parts := []string{it.Label + strings.Repeat(" ", labels-utf8.RuneCountInString(it.Label))}
	if it.Total > 0 {
		parts = append(parts, bar(it.Done, it.Total, p.barWidth))
	}
	parts = append(parts, p.count(it))
	parts = append(parts, it.Detail...)
	parts = append(parts, p.speed(it, st, now)...)
	parts = append(parts, it.Status)
	return strings.Join(nonEmpty(parts), "  ")
}

// count is "1,234 rows written", or with a total "3/6 ended (50%)".
func (p *progress) count(it progressItem) string {
	if it.Total <= 0 {
		return strings.TrimSpace(thousands(it.Done) + " " + it.Unit)
	}
	pct := min(it.Done, it.Total) * 100 / it.Total
	return strings.TrimSpace(fmt.Sprintf("%s/%s %s", thousands(it.Done), thousands(it.Total), it.Unit)) + fmt.Sprintf(" (%d%%)", pct)
}

// speed is the rate over the window and, with a total, the ETA at that
// rate; nothing once the item ended or before two samples.
func (p *progress) speed(it progressItem, st *itemState, now time.Time) []string {
	if it.Ended {
		return nil
	}
	r, ok := st.rate()
	if !ok {
		return nil
	}
	out := []string{rateText(r, it.Rate)}
	if it.Total > 0 && it.Done < it.Total && r > 0 {
		out = append(out, "ETA "+durationText(time.Duration(float64(it.Total-it.Done)/r*float64(time.Second))))
	}
	return out
}

// cut shortens a line to the terminal's width: a line that wraps would
// break the redraw, which moves up one row per line.
func (p *progress) cut(s string) string {
	if p.width <= 1 || utf8.RuneCountInString(s) < p.width {
		return s
	}
	r := []rune(s)
	return string(r[:p.width-1])
}

// record adds a sample at now (replacing one at the same time) and drops
// those before the window, keeping the last one before it as the start.
func (st *itemState) record(now time.Time, done int64, window time.Duration) {
	if n := len(st.samples); n > 0 && !now.After(st.samples[n-1].t) {
		st.samples[n-1].done = done
	} else {
		st.samples = append(st.samples, sample{now, done})
	}
	for len(st.samples) > 2 && !st.samples[1].t.After(now.Add(-window)) {
		st.samples = st.samples[1:]
	}
}

// rate is per second from the first sample kept to the last.
func (st *itemState) rate() (float64, bool) {
	if len(st.samples) < 2 {
		return 0, false
	}
	first, last := st.samples[0], st.samples[len(st.samples)-1]
	dt := last.t.Sub(first.t).Seconds()
	if dt <= 0 {
		return 0, false
	}
	return math.Max(0, float64(last.done-first.done)/dt), true
}

// bar is "[=========           ]" filled to done/total.
func bar(done, total int64, width int) string {
	n := int(min(done, total) * int64(width) / total)
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}

// rateText is "12.5 rows/s", or per minute below one a second.
func rateText(perSec float64, unit string) string {
	per := "s"
	if perSec > 0 && perSec < 1 {
		perSec, per = perSec*60, "min"
	}
	var n string
	switch {
	case perSec >= 100:
		n = thousands(int64(math.Round(perSec)))
	case perSec >= 10:
		n = strconv.FormatFloat(perSec, 'f', 1, 64)
	default:
		n = strconv.FormatFloat(perSec, 'f', 2, 64)
	}
	return fmt.Sprintf("%s %s/%s", n, unit, per)
}

// durationText is "45s", "3m05s" or "2h03m" (rounded up to the second).
func durationText(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
}

// thousands is n with comma separators: 1234567 is "1,234,567".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func nonEmpty(parts []string) []string {
	out := parts[:0:0]
	for _, s := range parts {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
