package collate

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/tidemark/tidemark/internal/mysqlserver"
)

// alphabets hold characters each collation folds together or orders
// around the space: case, accents, ß, characters below the space, spaces,
// punctuation between the letters, and (utf8mb4) characters beyond the BMP.
var alphabets = map[string][]string{
	"utf8mb4_general_ci": {"a", "A", "á", "Å", "e", "é", "E", "È", "s", "S", "ß", "z", " ", " ", "\t", "\n", "_", "[", "0", "ÿ", "Ÿ", "😀", "🙂", "\uFFFD", "Ω", "ω", "И", "й"},
	"utf8mb3_general_ci": {"a", "A", "á", "e", "é", "s", "ß", " ", "\t", "_", "ÿ", "Ÿ", "Ω", "ω"},
	"latin1_swedish_ci":  {"a", "A", "å", "Å", "ä", "Ä", "e", "é", "E", "ü", "Y", "y", "ÿ", "Ÿ", " ", " ", "\t", "_", "€", "ß", "s", "Š", "×"},
}

func init() {
	for _, n := range []string{"utf8mb4", "utf8mb3"} {
		alphabets[n+"_general_nopad_ci"] = alphabets[n+"_general_ci"]
	}
	alphabets["latin1_swedish_nopad_ci"] = alphabets["latin1_swedish_ci"]
	alphabets["utf8mb4_bin"] = alphabets["utf8mb4_general_ci"]
	alphabets["latin1_bin"] = alphabets["latin1_swedish_ci"]
}

// TestCompareLikeMariaDB compares random strings under each collation in Go
// and in a real MariaDB (STRCMP), and pins the rules the destinations rely
// on: case and accents fold, PAD SPACE ignores trailing spaces, and a
// character below the space sorts a string before its prefix.
func TestCompareLikeMariaDB(t *testing.T) {
	srv, _ := mysqlserver.ForTest(t, mysqlserver.Options{}, "collate")
	ctx := context.Background()
	conn, err := srv.Root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Execute("SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	fixed := [][3]any{{"a b", "a", 1}}
	folding := [][3]any{{"a", "A", 0}, {"e", "é", 0}, {"Z", "_", -1}}
	padSpace := [][3]any{{"a", "a  ", 0}, {"a\t", "a", -1}, {"", " ", 0}}
	noPad := [][3]any{{"a", "a  ", -1}, {"a\t", "a", 1}, {"", " ", -1}}
	rng := rand.New(rand.NewSource(1))
	for _, name := range []string{"utf8mb4_general_ci", "utf8mb3_general_ci", "latin1_swedish_ci",
		"utf8mb4_general_nopad_ci", "utf8mb3_general_nopad_ci", "latin1_swedish_nopad_ci", "utf8mb4_bin", "latin1_bin"} {
		c := Lookup(name)
		if c == nil {
			t.Fatalf("no collation %s", name)
		}
		charset, _, _ := strings.Cut(name, "_")
		var pairs [][2]string
		cases := append(append([][3]any{}, fixed...), padSpace...)
		if strings.Contains(name, "nopad") {
			cases = append(append([][3]any{}, fixed...), noPad...)
		}
		if strings.HasSuffix(name, "_bin") {
			cases = append(cases, [3]any{"a", "A", 1}, [3]any{"€", "é", map[bool]int{true: -1, false: 1}[charset == "latin1"]})
		} else {
			cases = append(cases, folding...)
		}
		if charset != "latin1" && !strings.HasSuffix(name, "_bin") {
			cases = append(cases, [3]any{"s", "ß", 0}, [3]any{"😀", "🙂", 0})
		}
		for _, f := range cases {
			pairs = append(pairs, [2]string{f[0].(string), f[1].(string)})
			if got := c.Compare(f[0].(string), f[1].(string)); got != f[2].(int) {
				t.Errorf("%s: Compare(%q, %q) = %d, want %d", name, f[0], f[1], got, f[2])
			}
		}
		word := func() string {
			var b strings.Builder
			for n := rng.Intn(5); n >= 0; n-- {
				b.WriteString(alphabets[name][rng.Intn(len(alphabets[name]))])
			}
			return b.String()
		}
		for len(pairs) < 3000 {
			a := word()
			b := a
			if rng.Intn(3) > 0 {
				b = word()
			}
			// Mostly near-equal pairs: one character changed, or spaces added.
			switch rng.Intn(3) {
			case 0:
				b = a + strings.Repeat(" ", rng.Intn(3)) + alphabets[name][rng.Intn(len(alphabets[name]))]
			case 1:
				r := []rune(a)
				r[rng.Intn(len(r))] = []rune(alphabets[name][rng.Intn(len(alphabets[name]))])[0]
				b = string(r)
			}
			pairs = append(pairs, [2]string{a, b})
		}
		mismatches := compareLikeServer(t, conn, c, pairs)
		t.Logf("%s: %d pairs compared, %d differ from MariaDB", name, len(pairs), mismatches)
	}
}

// compareLikeServer compares each pair with c and with MariaDB's STRCMP,
// reports the first differences and returns how many there are.
func compareLikeServer(t *testing.T, conn *client.Conn, c *Collation, pairs [][2]string) int {
	t.Helper()
	mismatches := 0
	for i, want := range serverCompare(t, conn, c.Name, pairs) {
		if got := c.Compare(pairs[i][0], pairs[i][1]); got != want {
			mismatches++
			if mismatches < 10 {
				t.Errorf("%s: Compare(%+q, %+q) = %d, MariaDB says %d", c.Name, pairs[i][0], pairs[i][1], got, want)
			}
		}
	}
	return mismatches
}

// serverCompare returns MariaDB's STRCMP of each pair under collation.
func serverCompare(t *testing.T, conn *client.Conn, collation string, pairs [][2]string) []int {
	t.Helper()
	charset, _, _ := strings.Cut(collation, "_")
	out := make([]int, 0, len(pairs))
	for start := 0; start < len(pairs); start += 200 {
		batch := pairs[start:min(start+200, len(pairs))]
		cols := make([]string, len(batch))
		var args []any
		for i, p := range batch {
			cols[i] = fmt.Sprintf("STRCMP(CONVERT(? USING %[1]s) COLLATE %[2]s, CONVERT(? USING %[1]s) COLLATE %[2]s)", charset, collation)
			args = append(args, p[0], p[1])
		}
		res, err := conn.Execute("SELECT "+strings.Join(cols, ", "), args...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			v, _ := res.GetInt(0, i)
			out = append(out, int(v))
		}
	}
	return out
}

func TestLookup(t *testing.T) {
	for _, n := range []string{"utf8mb4_general_ci", "utf8_general_ci", "latin1_swedish_ci", "utf8mb4_bin", "latin1_bin",
		"utf8mb4_unicode_ci", "utf8_unicode_nopad_ci", "utf8mb4_uca1400_ai_ci", "uca1400_ai_ci", "utf8mb3_uca1400_nopad_ai_ci"} {
		if Lookup(n) == nil {
			t.Errorf("Lookup(%q) = nil", n)
		}
	}
	// Language-specific and accent- or case-sensitive UCA collations, and
	// MySQL 8's (docs/mysql.md says why).
	for _, n := range []string{"utf8mb4_nopad_bin", "utf8mb4_german2_ci", "utf8mb4_unicode_520_ci", "utf8mb4_uca1400_as_ci", "uca1400_ai_cs", "utf8mb4_0900_ai_ci", ""} {
		if Lookup(n) != nil {
			t.Errorf("Lookup(%q) is a collation tidemark cannot reproduce exactly", n)
		}
	}
}
