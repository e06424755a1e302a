package change

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestTagNames(t *testing.T) {
	for tag := TagOther; tag < tagCount; tag++ {
		b, err := json.Marshal(tag)
		if err != nil {
			t.Fatal(err)
		}
		var back Tag
		if err := json.Unmarshal(b, &back); err != nil || back != tag {
			t.Errorf("%s: JSON %s reads back as %s (%v)", tag, b, back, err)
		}
		if CanonicalForm(tag) == "" {
			t.Errorf("%s has no canonical form in words", tag)
		}
	}
	if _, err := ParseTag("varchar"); err == nil {
		t.Error("an unknown tag name was accepted")
	}
	// A column stored before tags existed has none, and reads as other.
	var c Column
	if err := json.Unmarshal([]byte(`{"name":"n","type":"integer","base_oid":23}`), &c); err != nil || c.Tag != TagOther || TagOf(c) != TagInt32 {
		t.Errorf("untagged integer column: tag %s, TagOf %s (%v)", c.Tag, TagOf(c), err)
	}
	b, _ := json.Marshal(Column{Name: "n"})
	if strings.Contains(string(b), "tag") {
		t.Errorf("an untagged column is written with a tag: %s", b)
	}
}

func TestPostgresTag(t *testing.T) {
	for oid, want := range map[uint32]Tag{16: TagBool, 20: TagInt64, 1700: TagDecimal, 1184: TagTimestampTZ,
		1043: TagText, 1042: TagOther, 3802: TagJSON, 1007: TagArray, 17: TagBytes, 99999: TagOther} {
		if got := PostgresTag(oid); got != want {
			t.Errorf("oid %d: %s, want %s", oid, got, want)
		}
	}
	if got := TagOf(Column{Tag: TagText, BaseOID: 23}); got != TagText {
		t.Errorf("TagOf prefers the oid over the column's own tag: %s", got)
	}
}

func TestCanonical(t *testing.T) {
	good := map[Tag][]string{
		TagBool:        {"t", "f"},
		TagInt16:       {"0", "-32768", "32767"},
		TagInt64:       {"-9223372036854775808", "9223372036854775807"},
		TagDecimal:     {"0", "0.00", "-0.5", "18446744073709551615", "NaN", "-Infinity", "12.340"},
		TagFloat32:     {"0.1", "-0", "1e+06", "123456", "3.4028235e+38", "NaN"},
		TagFloat64:     {"0.1", "1e+100", "1.5e-07", "123456789012345", "5e-324", "-Infinity"},
		TagBytes:       {`\x`, `\x00ff`},
		TagDate:        {"2024-02-29", "0044-03-15 BC", "294276-12-31", "infinity"},
		TagTime:        {"00:00:00", "23:59:59.999999", "24:00:00"},
		TagTimeTZ:      {"04:05:06+05:30", "04:05:06.5-09:30:15"},
		TagTimestamp:   {"2024-02-29 13:45:01.123456", "4713-01-01 00:00:00 BC", "-infinity"},
		TagTimestampTZ: {"2024-02-29 13:45:01.123456+00", "4714-11-24 00:00:00+00 BC"},
		TagInterval:    {"00:00:00", "838:59:59", "-838:59:58.999999", "1 year 2 mons 3 days 04:05:06.789", "-1 years +2 mons -3 days +04:05:06", "3 days"},
		TagJSON:        {`{"a": [1, 2.50]}`, `[]`, `"x"`},
		TagUUID:        {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		TagBits:        {"", "0101"},
		TagText:        {"", "😀 é", "a\nb"},
		TagArray:       {"{1,NULL,3}", "[0:1]={a,b}"},
	}
	bad := map[Tag][]string{
		TagBool:        {"true", "1", ""},
		TagInt16:       {"32768", "01", "+1", "1.0", ""},
		TagInt64:       {"9223372036854775808"},
		TagDecimal:     {"-0", "-0.00", ".5", "1e5", "00.1", "+1"},
		TagFloat32:     {"0.10", "1000000", "1e6", "inf"},
		TagFloat64:     {"1e+15x", "0.1000000000000000055511151231257827"},
		TagBytes:       {`\xDEAD`, `\x0`, "ab"},
		TagDate:        {"2024-2-29", "29.02.2024"},
		TagTime:        {"1:00:00", "00:00:00.1234567"},
		TagTimestamp:   {"2024-02-29T13:45:01", "2024-02-29 13:45:01+00"},
		TagTimestampTZ: {"2024-02-29 13:45:01+01", "2024-02-29 13:45:01"},
		TagInterval:    {"", "P1D", "1 day "},
		TagJSON:        {"{", "NaN"},
		TagUUID:        {"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc999c0b4ef8bb6d6bb9bd380a11"},
		TagBits:        {"012"},
		TagText:        {"\xff", "a\x00b"},
	}
	for tag, vs := range good {
		for _, v := range vs {
			if err := Canonical(tag, v); err != nil {
				t.Errorf("%s %q refused: %v", tag, v, err)
			}
		}
	}
	for tag, vs := range bad {
		for _, v := range vs {
			if err := Canonical(tag, v); err == nil {
				t.Errorf("%s %q accepted", tag, v)
			} else if !strings.Contains(err.Error(), CanonicalForm(tag)) {
				t.Errorf("%s %q: the error does not say the form: %v", tag, v, err)
			}
		}
	}
}

func TestFormatFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		tag  Tag
		want string
	}{
		{1e6, TagFloat32, "1e+06"}, {123456, TagFloat32, "123456"}, {1e15, TagFloat64, "1e+15"},
		{123456789012345, TagFloat64, "123456789012345"}, {1.5e-7, TagFloat64, "1.5e-07"},
		{0.0001, TagFloat64, "0.0001"}, {math.Copysign(0, -1), TagFloat64, "-0"},
		{math.NaN(), TagFloat64, "NaN"}, {math.Inf(-1), TagFloat32, "-Infinity"},
	} {
		if got := FormatFloat(c.f, c.tag); got != c.want {
			t.Errorf("FormatFloat(%v, %s) = %q, want %q", c.f, c.tag, got, c.want)
		}
	}
}
