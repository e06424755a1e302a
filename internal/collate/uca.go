package collate

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"
	"unicode/utf8"
)

// MariaDB's UCA collations (utf8mb4_unicode_ci, UCA 4.0.0;
// utf8mb4_uca1400_ai_ci, UCA 14.0.0) compare primary weights only: a
// character has none (ignorable: U+0300 and the other combining accents),
// one, or several (an expansion: ß weighs as "ss", ﬁ as "fi"), and under
// uca1400 some sequences of two or three characters weigh together (a
// contraction: "L·" weighs as "L", Thai "เก" as "กเ"). Characters the
// tables do not list weigh implicitly, two weights from the code point
// (WEIGHT_STRING's FBC1 D55C for U+D55C). The tables (uca_gen.go) are
// generated from a MariaDB server's WEIGHT_STRING by gen/uca.go.

// Run is consecutive code points Lo..Hi that weigh W, or, when Step is
// set, W with its last weight counting up by one per code point after Lo.
type Run struct {
	Lo, Hi rune
	Step   bool
	W      []uint16
}

// ucaTable is one UCA collation's weights.
type ucaTable struct {
	runs   []Run // sorted, the listed code points only
	contr  map[string][]uint16
	heads  map[rune]bool // first characters of contractions
	longer int           // characters in the longest contraction
	space  uint16        // the space's weight
}

// ucaData decodes a table once, when first used.
type ucaData struct {
	enc  string
	once sync.Once
	t    *ucaTable
}

func (d *ucaData) table() *ucaTable {
	d.once.Do(func() {
		t, err := decodeUCA(d.enc)
		if err != nil {
			panic("collate: generated UCA table: " + err.Error()) // a broken uca_gen.go
		}
		d.t = t
	})
	return d.t
}

// decodeUCA reads a table written by gen/uca.go's encode.
func decodeUCA(enc string) (*ucaTable, error) {
	z, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(z)))
	if err != nil {
		return nil, err
	}
	r := bytes.NewReader(raw)
	t := &ucaTable{contr: map[string][]uint16{}, heads: map[rune]bool{}}
	prevW := int64(0)
	readW := func(n int) ([]uint16, error) {
		ws := make([]uint16, n)
		for i := range ws {
			d, err := binary.ReadVarint(r)
			if err != nil {
				return nil, err
			}
			prevW += d
			ws[i] = uint16(prevW)
		}
		return ws, nil
	}
	nRuns, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	next := rune(0)
	for range nRuns {
		gap, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		length, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		ws, err := readW(int(b >> 1))
		if err != nil {
			return nil, err
		}
		lo := next + rune(gap)
		t.runs = append(t.runs, Run{Lo: lo, Hi: lo + rune(length), Step: b&1 == 1, W: ws})
		next = lo + rune(length) + 1
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	prevC := int64(0)
	for range n {
		l, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		rs := make([]rune, l)
		for i := range rs {
			d, err := binary.ReadVarint(r)
			if err != nil {
				return nil, err
			}
			prevC += d
			rs[i] = rune(prevC)
		}
		b, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		ws, err := readW(int(b))
		if err != nil {
			return nil, err
		}
		t.contr[string(rs)] = ws
		t.heads[rs[0]] = true
		t.longer = max(t.longer, len(rs))
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d bytes after the contractions", r.Len())
	}
	sp := t.weights(' ', nil)
	if len(sp) != 1 {
		return nil, fmt.Errorf("the space weighs %v", sp)
	}
	t.space = sp[0]
	return t, nil
}

// implicit is the weights of a code point the table does not list.
func implicit(cp rune) [2]uint16 {
	return [2]uint16{uint16(0xFBC0 + cp>>15), uint16(cp&0x7FFF | 0x8000)}
}

// weights appends a code point's weights to buf.
func (t *ucaTable) weights(cp rune, buf []uint16) []uint16 {
	i := sort.Search(len(t.runs), func(i int) bool { return t.runs[i].Hi >= cp })
	if i < len(t.runs) && t.runs[i].Lo <= cp {
		r := t.runs[i]
		buf = append(buf, r.W...)
		if r.Step {
			buf[len(buf)-1] += uint16(cp - r.Lo)
		}
		return buf
	}
	w := implicit(cp)
	return append(buf, w[:]...)
}

// token appends the weights of s's first character, or of the longest
// contraction s starts with, and returns how many bytes they weigh.
func (t *ucaTable) token(s string, buf []uint16) ([]uint16, int) {
	r, n := utf8.DecodeRuneInString(s)
	if t.heads[r] {
		ends := []int{n}
		for end := n; len(ends) < t.longer && end < len(s); {
			_, m := utf8.DecodeRuneInString(s[end:])
			end += m
			ends = append(ends, end)
		}
		for i := len(ends) - 1; i > 0; i-- {
			if w, ok := t.contr[s[:ends[i]]]; ok {
				return append(buf, w...), ends[i]
			}
		}
	}
	return t.weights(r, buf), n
}

// ucaScanner yields a string's weights one by one.
type ucaScanner struct {
	t   *ucaTable
	s   string
	buf []uint16
	pos int
}

func (sc *ucaScanner) next() (uint16, bool) {
	for sc.pos >= len(sc.buf) {
		if sc.s == "" {
			return 0, false
		}
		var n int
		sc.buf, n = sc.t.token(sc.s, sc.buf[:0])
		sc.s, sc.pos = sc.s[n:], 0
	}
	sc.pos++
	return sc.buf[sc.pos-1], true
}

// compareUCA compares weight by weight; when one string runs out, the
// other's remaining weights are compared with the space's (PAD SPACE) or
// make it the greater (NO PAD), as MariaDB's strnncollsp does.
func (c *Collation) compareUCA(a, b string) int {
	t := c.uca.table()
	var ba, bb [8]uint16
	sa, sb := ucaScanner{t: t, s: a, buf: ba[:0]}, ucaScanner{t: t, s: b, buf: bb[:0]}
	for {
		wa, oka := sa.next()
		wb, okb := sb.next()
		if oka && okb {
			if wa != wb {
				return cmp(wa, wb)
			}
			continue
		}
		if !oka && !okb {
			return 0
		}
		sign, w, rest := 1, wa, &sa
		if !oka {
			sign, w, rest = -1, wb, &sb
		}
		if c.noPad {
			return sign
		}
		for ok := true; ok; w, ok = rest.next() {
			if w != t.space {
				return sign * cmp(w, t.space)
			}
		}
		return 0
	}
}

func cmp(a, b uint16) int {
	if a < b {
		return -1
	}
	return 1
}

// Weights returns a string's primary weights as the source's
// WEIGHT_STRING gives them, for the UCA collations (nil for the others).
func (c *Collation) Weights(s string) []uint16 {
	if c.uca == nil {
		return nil
	}
	t := c.uca.table()
	out := []uint16{}
	for s != "" {
		var n int
		out, n = t.token(s, out)
		s = s[n:]
	}
	return out
}

// Expands reports whether the collation is a UCA one, whose characters
// weigh nothing, one weight or several, and some sequences together
// (Runs, Contractions); otherwise each character weighs one (Mapped).
func (c *Collation) Expands() bool { return c.uca != nil }

// Runs covers every code point (0 to U+10FFFF) with runs of a UCA
// collation's weights, in order.
func (c *Collation) Runs() []Run {
	if c.uca == nil {
		return nil
	}
	var out []Run
	next := rune(0)
	fill := func(to rune) { // implicit weights, one run per 32768 code points
		for next < to {
			end := min(to, next|0x7FFF+1)
			w := implicit(next)
			out = append(out, Run{Lo: next, Hi: end - 1, Step: true, W: w[:]})
			next = end
		}
	}
	for _, r := range c.uca.table().runs {
		fill(r.Lo)
		out = append(out, r)
		next = r.Hi + 1
	}
	fill(0x110000)
	return out
}

// Contractions maps the sequences of characters a UCA collation weighs
// together to their weights.
func (c *Collation) Contractions() map[string][]uint16 {
	if c.uca == nil {
		return nil
	}
	return c.uca.table().contr
}

// SpaceWeight is the space's weight under a UCA collation.
func (c *Collation) SpaceWeight() uint16 {
	if c.uca == nil {
		return space
	}
	return c.uca.table().space
}
