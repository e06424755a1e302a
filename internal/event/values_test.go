package event

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// TestValues checks each tag's encoding against the Debezium mode
// docs/events.md names for it.
func TestValues(t *testing.T) {
	col := func(tag change.Tag, mod int32) change.Column { return change.Column{Name: "v", Tag: tag, TypeMod: mod} }
	for _, c := range []struct {
		col  change.Column
		in   string
		want string
	}{
		{col(change.TagBool, -1), "t", `true`},
		{col(change.TagInt64, -1), "-9223372036854775808", `-9223372036854775808`},
		{col(change.TagDecimal, -1), "18446744073709551615.50", `"18446744073709551615.50"`},
		{col(change.TagDecimal, -1), "NaN", `"NaN"`},
		{col(change.TagFloat64, -1), "1e+100", `1e+100`},
		{col(change.TagFloat64, -1), "-0", `-0`},
		{col(change.TagFloat32, -1), "Infinity", `"Infinity"`},
		{col(change.TagText, -1), "é \"q\"\n😀", `"é \"q\"\n😀"`},
		{col(change.TagBytes, -1), `\x00ff10`, `"AP8Q"`},
		{col(change.TagBits, 1), "1", `true`},
		{col(change.TagBits, 10), "1000000001", `"AQI="`}, // 0x201 little-endian
		{col(change.TagDate, -1), "1970-01-02", `1`},
		{col(change.TagDate, -1), "1969-12-31", `-1`},
		{col(change.TagDate, -1), "0001-01-01 BC", `-719528`},
		{col(change.TagTime, 6), "13:45:01.5", `49501500000`},
		{col(change.TagTimeTZ, -1), "04:05:06+05:30", `"22:35:06Z"`},
		{col(change.TagTimeTZ, -1), "23:00:00.25-02", `"01:00:00.25Z"`},
		{col(change.TagTimestamp, 6), "2024-02-29 13:45:01.123456", `1709214301123456`},
		{col(change.TagTimestamp, 3), "2024-02-29 13:45:01.123", `1709214301123`},
		{col(change.TagTimestamp, -1), "1969-12-31 23:59:59.999999", `-1`},
		{col(change.TagTimestamp, 6), "infinity", `9223372036825200000`},
		{col(change.TagTimestampTZ, 6), "2024-02-29 13:45:01.123456+00", `"2024-02-29T13:45:01.123456Z"`},
		{col(change.TagTimestampTZ, 6), "0044-03-15 12:00:00+00 BC", `"-0043-03-15T12:00:00Z"`},
		{col(change.TagTimestampTZ, 6), "12345-01-01 00:00:00+00", `"+12345-01-01T00:00:00Z"`},
		{col(change.TagInterval, -1), "1 year 2 mons 3 days 04:05:06.78", `"P1Y2M3DT4H5M6.78S"`},
		{col(change.TagInterval, -1), "-838:59:58.999999", `"P0Y0M0DT-838H-59M-58.999999S"`},
		{col(change.TagInterval, -1), "-1 years +2 mons -3 days", `"P-1Y2M-3DT0H0M0S"`},
		{col(change.TagJSON, -1), `{"a": [1, 2.50]}`, `"{\"a\": [1, 2.50]}"`},
		{col(change.TagUUID, -1), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
		{col(change.TagArray, -1), "{1,NULL}", `"{1,NULL}"`},
	} {
		got, err := appendValue(nil, c.col, change.Text(c.in))
		if err != nil {
			t.Errorf("%s %q: %v", c.col.Tag, c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s %q: %s, want %s", c.col.Tag, c.in, got, c.want)
		}
	}
}

func TestUnchangedAndNull(t *testing.T) {
	text := change.Column{Name: "v", Tag: change.TagText}
	if got, _ := appendValue(nil, text, change.Value{Unchanged: true}); string(got) != `"`+Unavailable+`"` {
		t.Errorf("unchanged text: %s", got)
	}
	if got, _ := appendValue(nil, change.Column{Tag: change.TagBytes}, change.Value{Unchanged: true}); string(got) != `"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="` {
		t.Errorf("unchanged bytes: %s", got)
	}
	if got, _ := appendValue(nil, text, change.Null); string(got) != "null" {
		t.Errorf("null: %s", got)
	}
}

// TestValuesRefused: a value outside the format fails with the reason,
// never silently.
func TestValuesRefused(t *testing.T) {
	for _, c := range []struct {
		tag  change.Tag
		in   string
		want string
	}{
		{change.TagTimestamp, "294276-12-31 23:59:59.999999", "beyond"},
		{change.TagBytes, "zz", "hex"},
		{change.TagInt32, "1.5", "integer"},
		{change.TagDate, "yesterday", "YYYY-MM-DD"},
	} {
		_, err := appendValue(nil, change.Column{Tag: c.tag, TypeMod: -1}, change.Text(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want an error saying %q", c.tag, c.in, err, c.want)
		}
	}
}
