// Package collate compares text as a source database's collation does, for
// destinations that must order and match text keys like the source: two
// keys the source calls equal are one row, and a chunk's key range holds
// the keys the source puts in it.
//
// A Collation here gives each character one weight (its "sort character")
// and compares strings weight by weight, PAD SPACE (the shorter string
// compares as if padded with spaces) or NO PAD. MariaDB's
// utf8mb4_general_ci, utf8mb3_general_ci and latin1_swedish_ci, their
// _nopad_ twins, and utf8mb4_bin, utf8mb3_bin and latin1_bin are of that
// kind; their tables
// are generated from a MariaDB server's WEIGHT_STRING (see gen/main.go), and
// the tests compare against a real server. MariaDB's UCA collations
// (utf8mb4_unicode_ci, utf8mb4_uca1400_ai_ci and their twins), whose
// characters weigh nothing, one weight or several, are here too (uca.go).
// Others (the language-specific UCA ones such as utf8mb4_german2_ci, the
// accent- or case-sensitive uca1400 ones, MySQL 8's utf8mb4_0900_ai_ci:
// see docs/mysql.md) are not, so a destination refuses keys under them.
package collate

import (
	"sort"
	"sync"
	"unicode/utf8"
)

// Collation is one source collation.
type Collation struct {
	// Name is the source's name of the collation (utf8mb4_general_ci).
	Name string
	// mapped lists the characters whose weight is not their code point,
	// sorted by character.
	mapped [][2]rune
	// supplementary, when not 0, is the weight of every character beyond
	// the BMP (utf8mb4_general_ci gives them all U+FFFD's).
	supplementary rune
	// noPad compares the rest of the longer string as it is: "a" < "a ".
	noPad bool

	// uca, when set, makes this a UCA collation (uca.go): mapped and
	// supplementary are unused.
	uca *ucaData

	once sync.Once
	bmp  []rune // weight of every BMP character
}

const space = ' '

var collations = map[string]*Collation{}

func register(c *Collation, aliases ...string) {
	for _, n := range append([]string{c.Name}, aliases...) {
		collations[n] = c
	}
}

func init() {
	// utf8mb3 holds only the BMP, which it weighs like utf8mb4, and the
	// nopad twins weigh like the others (the generator checks); MariaDB
	// before 10.6 spells utf8mb3 utf8.
	general, latin1 := widen(utf8mb4GeneralCI), widen(latin1SwedishCI)
	for _, noPad := range []bool{false, true} {
		infix := ""
		if noPad {
			infix = "nopad_"
		}
		register(&Collation{Name: "utf8mb4_general_" + infix + "ci", mapped: general, supplementary: 0xFFFD, noPad: noPad})
		register(&Collation{Name: "utf8mb3_general_" + infix + "ci", mapped: general, supplementary: 0xFFFD, noPad: noPad}, "utf8_general_"+infix+"ci")
		register(&Collation{Name: "latin1_swedish_" + infix + "ci", mapped: latin1, noPad: noPad})
	}
	// The binary collations are PAD SPACE too ("a" = "a ", "a\t" < "a"),
	// which bytewise order is not; and latin1_bin orders cp1252's bytes
	// 0x80..0x9F (€, “, Š…) before é, their code points after it. Their
	// nopad twins are bytewise order exactly, so not here.
	register(&Collation{Name: "utf8mb4_bin"})
	register(&Collation{Name: "utf8mb3_bin"}, "utf8_bin")
	register(&Collation{Name: "latin1_bin", mapped: widen(latin1Bin)})
	// The UCA ones: each utf8mb3 and nopad twin weighs the BMP like its
	// utf8mb4 collation (the generator checks). MariaDB also names the
	// uca1400 ones without their character set.
	unicode, uca1400 := &ucaData{enc: unicode400}, &ucaData{enc: uca1400}
	for _, infix := range []string{"", "nopad_"} {
		noPad := infix != ""
		register(&Collation{Name: "utf8mb4_unicode_" + infix + "ci", uca: unicode, noPad: noPad})
		register(&Collation{Name: "utf8mb3_unicode_" + infix + "ci", uca: unicode, noPad: noPad}, "utf8_unicode_"+infix+"ci")
		register(&Collation{Name: "utf8mb4_uca1400_" + infix + "ai_ci", uca: uca1400, noPad: noPad}, "uca1400_"+infix+"ai_ci")
		register(&Collation{Name: "utf8mb3_uca1400_" + infix + "ai_ci", uca: uca1400, noPad: noPad})
	}
}

func widen(t [][2]uint16) [][2]rune {
	out := make([][2]rune, 0, len(t))
	for _, p := range t {
		if rune(p[0]) != rune(p[1]) {
			out = append(out, [2]rune{rune(p[0]), rune(p[1])})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// Lookup returns the collation of that name, or nil when tidemark cannot
// reproduce it.
func Lookup(name string) *Collation { return collations[name] }

// Names lists the collations Lookup knows, sorted.
func Names() []string {
	out := make([]string, 0, len(collations))
	for n := range collations {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Mapped returns the characters whose weight is not their code point, as
// (character, weight) pairs sorted by character; every other character of
// the BMP weighs its code point. A destination that compares in SQL
// translates each character to the character of its weight.
func (c *Collation) Mapped() [][2]rune { return c.mapped }

// PadSpace reports whether the collation compares as if the shorter string
// were padded with spaces; otherwise (NO PAD) a prefix sorts first.
func (c *Collation) PadSpace() bool { return !c.noPad }

// Supplementary returns the weight of every character beyond the BMP, or 0
// when such characters weigh their code point.
func (c *Collation) Supplementary() rune { return c.supplementary }

// Weight returns a character's weight.
func (c *Collation) Weight(r rune) rune {
	if r > 0xFFFF {
		if c.supplementary != 0 {
			return c.supplementary
		}
		return r
	}
	c.once.Do(c.fill)
	return c.bmp[r]
}

func (c *Collation) fill() {
	c.bmp = make([]rune, 0x10000)
	for i := range c.bmp {
		c.bmp[i] = rune(i)
	}
	for _, p := range c.mapped {
		c.bmp[p[0]] = p[1]
	}
}

// Compare returns -1, 0 or +1 as a sorts before, equal to or after b:
// weight by weight, then the rest of the longer string compared with
// spaces (PAD SPACE, so "a" = "a " and "a\t" < "a") or, NO PAD, the longer
// string after its prefix. Invalid UTF-8 weighs as U+FFFD.
func (c *Collation) Compare(a, b string) int {
	if c.uca != nil {
		return c.compareUCA(a, b)
	}
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if wa, wb := c.Weight(ra), c.Weight(rb); wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	sign, rest := 1, a
	if a == "" {
		sign, rest = -1, b
	}
	if c.noPad {
		if rest == "" {
			return 0
		}
		return sign
	}
	for _, r := range rest {
		switch w := c.Weight(r); {
		case w > space:
			return sign
		case w < space:
			return -sign
		}
	}
	return 0
}
