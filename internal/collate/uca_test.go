package collate

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/tidemark/tidemark/internal/mysqlserver"
)

// ucaAlphabet holds what the UCA collations weigh unlike one weight per
// character: case and accents (precomposed and combining), expansions (ß,
// ﬁ, Æ, ½), ignorables (combining marks, U+200B, U+00AD), contractions of
// uca1400 and their parts (L·, И + U+0306, Thai prevowels, Myanmar,
// Tibetan), implicit weights (Hangul, Han, unassigned), characters below
// the space (tab, newline) and other spaces, and characters beyond the BMP.
var ucaAlphabet = []string{"a", "A", "á", "\u0301", "e", "é", "E", "s", "S", "ß", "ẞ", "ss", "f", "i", "ﬁ", "Æ", "æ", "½", "1",
	"\u200B", "\u00AD", "L", "l", "·", "\u0387", "И", "\u0306", "Й", "й", "เ", "ก", "ข", "\u0E48", "ဥ", "ီ", "ྲ", "ཱ", "ྀ",
	"한", "中", "\u0378", "\uFFFD", " ", " ", "\u00A0", "\t", "\n", "_", "-", "[", "0", "z", "Ω", "ω",
	"😀", "🙂", "𠀀", "\U000E0001", "\U0010FFFF", "\U00011347", "\U0001133E"}

var ucaNames = []string{"utf8mb4_unicode_ci", "utf8mb4_unicode_nopad_ci", "utf8mb3_unicode_ci",
	"utf8mb4_uca1400_ai_ci", "utf8mb4_uca1400_nopad_ai_ci", "utf8mb3_uca1400_ai_ci", "utf8mb3_uca1400_nopad_ai_ci"}

// TestUCALikeMariaDB compares the UCA collations with a real MariaDB:
// WEIGHT_STRING of random strings of the tricky characters above, STRCMP
// of random near-equal pairs, and the facts the destinations rely on.
func TestUCALikeMariaDB(t *testing.T) {
	srv, _ := mysqlserver.ForTest(t, mysqlserver.Options{}, "uca")
	conn, err := srv.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Execute("SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	for _, name := range ucaNames {
		c := Lookup(name)
		if c == nil || !c.Expands() {
			t.Fatalf("%s: not a UCA collation", name)
		}
		alphabet := ucaAlphabet
		if strings.HasPrefix(name, "utf8mb3") {
			alphabet = slices.DeleteFunc(slices.Clone(alphabet), func(s string) bool { return strings.ContainsFunc(s, func(r rune) bool { return r > 0xFFFF }) })
		}
		word := func() string {
			var b strings.Builder
			for n := rng.Intn(6); n >= 0; n-- {
				b.WriteString(alphabet[rng.Intn(len(alphabet))])
			}
			return b.String()
		}
		var words []string
		for len(words) < 2000 {
			words = append(words, word())
		}
		checkWeights(t, conn, c, words)

		pairs := ucaFacts(t, c)
		for len(pairs) < 4000 {
			a, b := word(), word()
			switch rng.Intn(4) {
			case 0:
				b = a + strings.Repeat(" ", rng.Intn(3)) + alphabet[rng.Intn(len(alphabet))]
			case 1:
				b = a + alphabet[rng.Intn(len(alphabet))] + word()
			case 2:
				r := []rune(a)
				r[rng.Intn(len(r))] = []rune(alphabet[rng.Intn(len(alphabet))])[0]
				b = string(r)
			}
			pairs = append(pairs, [2]string{a, b})
		}
		mismatches := compareLikeServer(t, conn, c, pairs)
		t.Logf("%s: %d strings weighed, %d pairs compared, %d differ from MariaDB", name, len(words), len(pairs), mismatches)
	}
}

// checkWeights compares Weights with the server's WEIGHT_STRING.
func checkWeights(t *testing.T, conn *client.Conn, c *Collation, words []string) {
	t.Helper()
	charset, _, _ := strings.Cut(c.Name, "_")
	bad := 0
	for start := 0; start < len(words); start += 200 {
		batch := words[start:min(start+200, len(words))]
		cols := make([]string, len(batch))
		args := make([]any, len(batch))
		for i, w := range batch {
			cols[i] = fmt.Sprintf("HEX(WEIGHT_STRING(CONVERT(? USING %s) COLLATE %s))", charset, c.Name)
			args[i] = w
		}
		res, err := conn.Execute("SELECT "+strings.Join(cols, ", "), args...)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range batch {
			want, _ := res.GetString(0, i)
			var got strings.Builder
			for _, x := range c.Weights(w) {
				got.WriteString(strings.ToUpper(hex.EncodeToString([]byte{byte(x >> 8), byte(x)})))
			}
			if got.String() != want {
				bad++
				if bad < 10 {
					t.Errorf("%s: Weights(%+q) = %s, WEIGHT_STRING %s", c.Name, w, got.String(), want)
				}
			}
		}
	}
}

// ucaFacts checks the comparisons the docs and the destinations rely on,
// and returns them as pairs for the server to confirm.
func ucaFacts(t *testing.T, c *Collation) [][2]string {
	t.Helper()
	facts := [][3]any{{"a", "A", 0}, {"e", "é", 0}, {"e\u0301", "é", 0}, {"ss", "ß", 0}, {"SS", "ß", 0}, {"fi", "ﬁ", 0},
		{"_", "Z", -1}, {"a b", "a", 1}, {"a\u200B", "a", 0}, {"Z", "ä", 1}}
	if c.PadSpace() {
		facts = append(facts, [3]any{"a", "a  ", 0}, [3]any{"a\t", "a", -1}, [3]any{"", " ", 0})
	} else {
		facts = append(facts, [3]any{"a", "a  ", -1}, [3]any{"a\t", "a", 1}, [3]any{"", " ", -1})
	}
	if strings.Contains(c.Name, "uca1400") {
		// Contractions; and emoji weigh apart (unicode_ci weighs every
		// character beyond the BMP alike).
		facts = append(facts, [3]any{"L·", "L", 0}, [3]any{"И\u0306", "й", 0}, [3]any{"И\u0306", "И", 1}, [3]any{"เก", "กเ", 0})
		if strings.HasPrefix(c.Name, "utf8mb4") {
			facts = append(facts, [3]any{"😀", "🙂", -1})
		}
	} else {
		facts = append(facts, [3]any{"L·", "L", 1}, [3]any{"И\u0306", "И", 0})
		if strings.HasPrefix(c.Name, "utf8mb4") {
			facts = append(facts, [3]any{"😀", "🙂", 0})
		}
	}
	var pairs [][2]string
	for _, f := range facts {
		a, b := f[0].(string), f[1].(string)
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			t.Fatalf("bad fact %q", f)
		}
		if got := c.Compare(a, b); got != f[2].(int) {
			t.Errorf("%s: Compare(%+q, %+q) = %d, want %d", c.Name, a, b, got, f[2])
		}
		pairs = append(pairs, [2]string{a, b})
	}
	return pairs
}

// TestNo0900 pins why MySQL 8's utf8mb4_0900_ai_ci is refused rather than
// served by the uca1400 tables. MySQL builds it from UCA 9.0.0's weights
// (NO PAD, https://dev.mysql.com/doc/refman/8.0/en/charset-unicode-sets.html);
// a code point unassigned in Unicode 9.0 gets UCA's implicit weights there
// (FBC0 + cp>>15, https://www.unicode.org/reports/tr10/#Implicit_Weights),
// which sort after every letter, while UCA 14.0.0 weighs the characters
// Unicode 10 to 14 added among the others. U+1F970 (🥰, Unicode 11:
// https://unicode.org/emoji/charts/emoji-versions.html) sorts after "a"
// under utf8mb4_0900_ai_ci and before it under uca1400. No UCA 9.0.0 table
// nor MySQL 8 server is at hand to generate and check one from.
func TestNo0900(t *testing.T) {
	for _, n := range []string{"utf8mb4_0900_ai_ci", "utf8mb4_0900_as_ci", "utf8mb4_0900_as_cs", "utf8mb4_de_pb_0900_ai_ci"} {
		if Lookup(n) != nil {
			t.Errorf("Lookup(%q): MySQL 8's UCA 9.0.0 collations are not reproduced", n)
		}
	}
	c := Lookup("utf8mb4_uca1400_nopad_ai_ci")
	if w := c.Weights("🥰"); len(w) != 1 || w[0] >= 0xFB00 {
		t.Errorf("uca1400 weighs U+1F970 %04X, want one explicit weight", w)
	}
	if got := c.Compare("🥰", "a"); got != -1 {
		t.Errorf("uca1400: Compare(🥰, a) = %d, want -1 (utf8mb4_0900_ai_ci: +1)", got)
	}
}
