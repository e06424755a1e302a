package expr

import (
	"strconv"
	"strings"
	"time"
)

// timeName is what a time reference starts from and how it prints by
// default.
type timeName struct {
	field         int // fieldBiz, fieldBizEnd or fieldScheduled
	defaultFormat string
}

const (
	fieldBiz = iota
	fieldBizEnd
	fieldScheduled
)

const (
	dateFormat     = "yyyyMMdd"
	dateTimeFormat = "yyyy-MM-dd HH:mm:ss"
)

var timeNames = map[string]timeName{
	"bizdate":     {fieldBiz, dateFormat},
	"biztime":     {fieldBiz, dateTimeFormat},
	"bizdate_end": {fieldBizEnd, dateFormat},
	"biztime_end": {fieldBizEnd, dateTimeFormat},
	"cyctime":     {fieldScheduled, dateTimeFormat},
}

type unit int

const (
	unitDay unit = iota
	unitYear
	unitMonth
	unitWeek
	unitHour
	unitMinute
)

// units maps the suffixes of an amount; none means days. "m" is left out
// on purpose: months or minutes?
var units = map[string]unit{
	"": unitDay, "d": unitDay, "y": unitYear, "mon": unitMonth,
	"w": unitWeek, "h": unitHour, "min": unitMinute,
}

func (r *ref) render(b *strings.Builder, env Env) error {
	switch r.kind {
	case refParam:
		v, ok := env.Params[r.name]
		if !ok {
			return r.errorf(0, "unknown parameter %q: declare it in the task's parameters", r.name)
		}
		b.WriteString(v)
		return nil
	case refOutput:
		outs, ok := env.Outputs[r.task]
		if !ok {
			return r.errorf(0, "%q is not an upstream task: outputs come from the tasks this one depends on", r.task)
		}
		v, ok := outs[r.name]
		if !ok {
			return r.errorf(0, "upstream task %q has no output %q", r.task, r.name)
		}
		b.WriteString(v)
		return nil
	}
	var t time.Time
	switch r.base.field {
	case fieldBiz:
		t = env.BizTime
	case fieldBizEnd:
		t = env.BizEnd
		if t.IsZero() {
			t = env.BizTime
		}
	case fieldScheduled:
		t = env.Scheduled
	}
	if t.IsZero() {
		return r.errorf(0, "no %s to render: the environment has no such time", r.name)
	}
	writeTime(b, add(t, r.n, r.unit), r.format)
	return nil
}

// add moves t by n units on its local wall clock, normalised by time.Date:
// a time skipped by a DST jump forward moves by the size of the jump. Years
// and months keep the day but stay within the month: January 31st plus one
// month is the last day of February.
func add(t time.Time, n int, u unit) time.Time {
	if n == 0 {
		return t
	}
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	switch u {
	case unitYear:
		return addMonths(t, 12*n)
	case unitMonth:
		return addMonths(t, n)
	case unitWeek:
		d += 7 * n
	case unitDay:
		d += n
	case unitHour:
		h += n
	case unitMinute:
		mi += n
	}
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), t.Location())
}

func addMonths(t time.Time, n int) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	m := int(mo) - 1 + n
	y += m / 12
	m %= 12
	if m < 0 {
		m += 12
		y--
	}
	// The day 0 of the month after is the last day of this one.
	last := time.Date(y, time.Month(m+2), 0, 0, 0, 0, 0, time.UTC).Day()
	return time.Date(y, time.Month(m+1), min(d, last), h, mi, s, t.Nanosecond(), t.Location())
}

// formatTokens are tried in order at each position of a format; anything
// else is copied.
var formatTokens = []string{"yyyy", "yy", "MM", "dd", "HH", "mm", "ss"}

func writeTime(b *strings.Builder, t time.Time, format string) {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	for i := 0; i < len(format); {
		tok := ""
		for _, f := range formatTokens {
			if strings.HasPrefix(format[i:], f) {
				tok = f
				break
			}
		}
		switch tok {
		case "":
			b.WriteByte(format[i])
			i++
			continue
		case "yyyy":
			if y >= 0 && y <= 9999 {
				pad(b, y, 4)
			} else {
				b.WriteString(strconv.Itoa(y))
			}
		case "yy":
			pad(b, (y%100+100)%100, 2)
		case "MM":
			pad(b, int(mo), 2)
		case "dd":
			pad(b, d, 2)
		case "HH":
			pad(b, h, 2)
		case "mm":
			pad(b, mi, 2)
		case "ss":
			pad(b, s, 2)
		}
		i += len(tok)
	}
}

// pad writes a non-negative n with at least width digits.
func pad(b *strings.Builder, n, width int) {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], int64(n), 10)
	for range width - len(s) {
		b.WriteByte('0')
	}
	b.Write(s)
}
