package event

import (
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// roundTrip holds, per tag and type modifier, values as PostgreSQL prints
// them (the edge values of TestCanonical, TestTypeFidelity and the sink
// type tests): each must decode back to itself exactly.
var roundTrip = []struct {
	tag  change.Tag
	mod  int32
	vals []string
}{
	{change.TagBool, -1, []string{"t", "f"}},
	{change.TagInt16, -1, []string{"0", "-32768", "32767", "-1"}},
	{change.TagInt32, -1, []string{"-2147483648", "2147483647"}},
	{change.TagInt64, -1, []string{"-9223372036854775808", "9223372036854775807", "1"}},
	{change.TagDecimal, -1, []string{"0", "0.00", "-0.5", "18446744073709551615", "NaN", "Infinity", "-Infinity", "12.340",
		"123456789012345678901234567890.123456789", "-0.000000000000000000000000000001"}},
	{change.TagFloat32, -1, []string{"0.1", "-0", "0", "1e+06", "123456", "3.4028235e+38", "1e-45", "1.1754944e-38", "NaN", "Infinity", "-Infinity"}},
	{change.TagFloat64, -1, []string{"0.1", "1e+100", "1.5e-07", "123456789012345", "5e-324", "-5e-324", "1.7976931348623157e+308",
		"2.225073858507201e-308", "1.234567890123456e+15", "-Infinity", "NaN", "-0"}},
	{change.TagText, -1, []string{"", "😀 é", "a\nb", "tab\there\r\\back\\slash \\N", `"quoted"`, "NULL", " "}},
	{change.TagBytes, -1, []string{`\x`, `\x00ff`, `\xdeadbeef00ff`, `\x5c78`, `\x0a0d09`}},
	{change.TagDate, -1, []string{"2024-02-29", "0044-03-15 BC", "4713-01-01 BC", "5874897-12-31", "294276-12-31", "infinity",
		"-infinity", "0001-01-01", "1970-01-01", "1969-12-31", "2000-02-29"}},
	{change.TagTime, 6, []string{"00:00:00", "23:59:59.999999", "24:00:00", "13:45:01.5"}},
	{change.TagTimestamp, 6, []string{"2024-02-29 13:45:01.123456", "4713-01-01 00:00:00 BC", "294246-12-31 23:59:59.999999",
		"infinity", "-infinity", "2000-01-01 00:00:00.000001", "0001-01-01 00:00:00", "1969-12-31 23:59:59.999999"}},
	{change.TagTimestamp, 3, []string{"2024-02-29 13:45:01.123", "1969-12-31 23:59:59.999", "infinity", "-infinity", "0044-03-15 12:00:00 BC"}},
	{change.TagTimestamp, -1, []string{"2024-02-29 13:45:01.123456"}},
	{change.TagTimestampTZ, 6, []string{"2024-02-29 13:45:01.123456+00", "4714-11-24 00:00:00+00 BC", "4713-01-01 00:00:00+00 BC",
		"12345-01-01 00:00:00+00", "0044-03-15 12:00:00+00 BC", "1999-12-31 23:59:59+00", "infinity", "-infinity"}},
	{change.TagInterval, -1, []string{"00:00:00", "838:59:59", "-838:59:58.999999", "1 year 2 mons 3 days 04:05:06.789",
		"-1 years +2 mons -3 days +04:05:06", "3 days", "1 day", "-00:00:01", "1 year 2 mons -3 days +04:05:06.000007",
		"-178000000 years", "178000000 years", "2562047788:00:54.775807", "-2562047788:00:54.775807",
		"-1 mons +1 day -00:00:00.000001", "-2147483648 mons", "-1 years -2 mons +3 days -04:05:06"}},
	{change.TagJSON, -1, []string{`{"a": [1, 2.50]}`, `[]`, `"x"`, "null", `{"a":1, "a" : 2,  "b":[1,2 ,3]}`}},
	{change.TagUUID, -1, []string{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000"}},
	{change.TagBits, 1, []string{"0", "1"}},
	{change.TagBits, 10, []string{"1000000001", "0000000000", "0101010101"}},
	{change.TagBits, 16, []string{"1000000000000001"}},
	{change.TagArray, -1, []string{"{1,NULL,3}", "[0:1]={a,b}", "{}", `{{"a\"b","c,d"},{"{e}","NULL"}}`}},
	{change.TagOther, -1, []string{"happy", "it's ok", "10.0.0.1/32"}},
}

func TestDecodeRoundTrip(t *testing.T) {
	for _, c := range roundTrip {
		col := change.Column{Name: "v", Tag: c.tag, TypeMod: c.mod}
		for _, v := range c.vals {
			if err := change.Canonical(c.tag, v); err != nil {
				t.Fatalf("test value: %v", err)
			}
			raw, err := EncodeValue(col, change.Text(v))
			if err != nil {
				t.Errorf("%s %q: encode: %v", c.tag, v, err)
				continue
			}
			got, err := DecodeValue(col, raw)
			if err != nil {
				t.Errorf("%s %q: decode %s: %v", c.tag, v, raw, err)
				continue
			}
			if got.Null || got.Text != v {
				t.Errorf("%s(%d) %q: encoded %s, decoded %q", c.tag, c.mod, v, raw, got.Text)
			}
		}
	}
	for _, col := range []change.Column{{Tag: change.TagText}, {Tag: change.TagBytes}, {Tag: change.TagInt64}} {
		if got, err := DecodeValue(col, []byte("null")); err != nil || !got.Null {
			t.Errorf("%s null: %v %v", col.Tag, got, err)
		}
	}
}

// TestDecodeLossy: the modes that drop information give the documented
// form, and Comparable gives a source value that same form.
func TestDecodeLossy(t *testing.T) {
	for _, c := range []struct {
		tag      change.Tag
		mod      int32
		in, want string
	}{
		{change.TagTimeTZ, -1, "04:05:06+05:30", "22:35:06+00"},
		{change.TagTimeTZ, -1, "12:34:56.789012+05:45", "06:49:56.789012+00"},
		{change.TagTimeTZ, -1, "23:59:59.999999-00:00:01", "00:00:00.999999+00"},
		{change.TagBits, -1, "101", "00000101"},
		{change.TagBits, 12, "101", "000000000101"},
		{change.TagTime, 6, "13:45:01.500", "13:45:01.5"},
		{change.TagInterval, -1, "1 years", "1 year"},
	} {
		col := change.Column{Name: "v", Tag: c.tag, TypeMod: c.mod}
		got, err := Comparable(col, change.Text(c.in))
		if err != nil || got.Text != c.want {
			t.Errorf("%s %q: %q %v, want %q", c.tag, c.in, got.Text, err, c.want)
		}
		again, err := Comparable(col, got)
		if err != nil || again != got {
			t.Errorf("%s %q: comparable form %q is not stable: %q %v", c.tag, c.in, got.Text, again.Text, err)
		}
	}
}

func TestDecodeRefused(t *testing.T) {
	for _, c := range []struct {
		tag change.Tag
		raw string
	}{
		{change.TagInt64, `"1"`}, {change.TagInt64, `1.5`}, {change.TagBool, `"t"`}, {change.TagBytes, `"***"`},
		{change.TagDate, `"2024-01-01"`}, {change.TagTimestampTZ, `"2024-01-01 00:00:00"`}, {change.TagInterval, `"P1D"`},
		{change.TagText, `12`}, {change.TagTimeTZ, `"12:00:00+01"`},
	} {
		if got, err := DecodeValue(change.Column{Name: "v", Tag: c.tag, TypeMod: -1}, []byte(c.raw)); err == nil {
			t.Errorf("%s %s: decoded as %q", c.tag, c.raw, got.Text)
		}
	}
}

// FuzzDecodeRoundTrip: for any canonical value that encodes, the decoded
// value is canonical again and a fixed point of encode-then-decode (so
// both sides of a verify agree); values in PostgreSQL's spelling come back
// exactly (TestDecodeRoundTrip).
func FuzzDecodeRoundTrip(f *testing.F) {
	for _, c := range roundTrip {
		for _, v := range c.vals {
			f.Add(uint8(c.tag), c.mod, v)
		}
	}
	f.Add(uint8(change.TagTimeTZ), int32(-1), "04:05:06.5-09:30:15")
	f.Fuzz(func(t *testing.T, tagN uint8, mod int32, v string) {
		tag := change.Tag(tagN % 20)
		if change.Canonical(tag, v) != nil {
			return
		}
		col := change.Column{Name: "v", Tag: tag, TypeMod: mod}
		raw, err := EncodeValue(col, change.Text(v))
		if err != nil {
			return // beyond what the event format carries: the encoder says so
		}
		got, err := DecodeValue(col, raw)
		if err != nil {
			t.Fatalf("%s(%d) %q: encoded %s, decode: %v", tag, mod, v, raw, err)
		}
		if err := change.Canonical(tag, got.Text); err != nil {
			t.Fatalf("%s(%d) %q: decoded %q: %v", tag, mod, v, got.Text, err)
		}
		again, err := Comparable(col, got)
		if err != nil || again != got {
			t.Fatalf("%s(%d) %q: decoded %q, then %q %v", tag, mod, v, got.Text, again.Text, err)
		}
	})
}
