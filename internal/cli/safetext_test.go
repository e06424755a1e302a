package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"public.orders":                    "public.orders",
		"a\tb\nc":                          "a\tb\nc",
		"evil\x1b]0;pwned\x07":             "evil",
		"evil\x1b]0;pwned\x1b\\rest":       "evilrest",
		"\x1b[2Jclear":                     "clear",
		"\x1b[1;31mred\x1b[0m":             "red",
		"\x1b[?1049h":                      "",
		"\x1bPq#0;2;0;0;0\x1b\\sixel":      "sixel",
		"\x1b_apc\u009cx":                  "x",
		"\x1bcreset":                       "reset",
		"\x1b(Bcharset":                    "charset",
		"\x1b":                             "",
		"\x1b[":                            "",
		"\x1b]0;never ended":               "",
		"\x1b]0;title\x1b[2Jafter":         "after",
		"c\u009b2Jsi":                      "csi",
		"o\u009d0;t\u009csc":               "osc",
		"bell\x07nul\x00cr\rbs\x08del\x7f": "bellnulcrbsdel",
		"c1\u0085\u009f":                   "c1",
		"bad \x9b2J utf8 \xff":             "bad \ufffd2J utf8 \ufffd",
		"café ✓ 表":                         "café ✓ 表",
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// The filter never lets a control character through, whatever the input.
func FuzzSafeText(f *testing.F) {
	for _, s := range []string{"evil\x1b]0;pwned\x07", "\x1b[2J", "\u009b31m", "\x1bP\x1b\\", "a\tb\n", "\xff\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := safeText(s)
		for _, r := range got {
			if (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f) {
				t.Fatalf("safeText(%q) = %q keeps %U", s, got, r)
			}
		}
		if c := cell(s); strings.ContainsAny(c, "\t\n") {
			t.Fatalf("cell(%q) = %q is not one cell", s, c)
		}
	})
}

// Every write through the CLI's text output is filtered, even when a
// sequence is split across writes.
func TestTextWriter(t *testing.T) {
	var b bytes.Buffer
	w := textWriter{&b}
	for _, p := range []string{"name\t", "evil\x1b]0;pw", "ned\x07\x1b", "[2J\n"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if got := b.String(); strings.ContainsAny(got, "\x1b\x07") || got != "name\tevilned[2J\n" {
		t.Errorf("wrote %q", got)
	}
}
