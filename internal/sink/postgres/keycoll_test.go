package postgres

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/collate"
)

// words returns two random strings of the alphabet's entries: unrelated,
// the second the first with spaces and an entry added, or the first with
// one entry replaced (near-equal pairs, where the collation's rules
// decide).
func words(rng *rand.Rand, alphabet []string) (string, string) {
	var a, b []string
	for n := rng.Intn(5); n >= 0; n-- {
		a = append(a, alphabet[rng.Intn(len(alphabet))])
		b = append(b, alphabet[rng.Intn(len(alphabet))])
	}
	switch rng.Intn(3) {
	case 0:
		b = append(append([]string{}, a...), strings.Repeat(" ", rng.Intn(3)), alphabet[rng.Intn(len(alphabet))])
	case 1:
		b = append([]string{}, a...)
		b[rng.Intn(len(b))] = alphabet[rng.Intn(len(alphabet))]
	}
	return strings.Join(a, ""), strings.Join(b, "")
}

// TestSortKeyComparesLikeSource checks the sort key functions against
// package collate's comparison (itself checked against MariaDB) on random
// strings built from folding characters, spaces and characters below the
// space: "C" order of the sort keys must be the source collation's order,
// and equal sort keys the source's equality.
func TestSortKeyComparesLikeSource(t *testing.T) {
	s := open(t, newDB(t))
	defer s.Close()
	ctx := t.Context()
	alphabet := []string{"a", "A", "á", "e", "é", "E", "s", "ß", "z", " ", " ", "\t", "\x01", "_", "[", "0", "ÿ", "Ÿ", "😀", "🙂", "\uFFFD", "€", "Å", "ä", "\U0010FFFF", "\u0081"}
	rng := rand.New(rand.NewSource(2))
	// The UCA collations' expansions, ignorables, contractions and their
	// parts, implicit weights, and more characters around the space.
	alphabet = append(alphabet, "\u0301", "\u200B", "ﬁ", "ss", "L·", "И", "\u0306", "เ", "ก", "ဥ", "ီ", "ྲ", "ཱ", "ྀ", "한", "中", "\u0378", "𠀀", "\U000E0001", "\n", "\u00A0", "\U0001133E")
	for _, name := range []string{"utf8mb4_general_ci", "latin1_swedish_ci", "utf8mb4_general_nopad_ci", "utf8mb4_bin", "latin1_bin",
		"utf8mb4_unicode_ci", "utf8mb4_unicode_nopad_ci", "utf8mb4_uca1400_ai_ci", "utf8mb4_uca1400_nopad_ai_ci"} {
		coll := collate.Lookup(name)
		tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "k_" + name}, Key: []int{0},
			Columns: []change.Column{{Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043, Collation: name}}}
		if err := s.ensureSortKeys(ctx, tbl); err != nil {
			t.Fatal(err)
		}
		// Twice: the second finds the function.
		if err := s.ensureSortKeys(ctx, tbl); err != nil {
			t.Fatal(err)
		}
		var as, bs []string
		for len(as) < 3000 {
			a, b := words(rng, alphabet)
			as, bs = append(as, a), append(bs, b)
		}
		f := sortKeyFunc(name)
		rows, err := s.conn.Query(ctx, `SELECT CASE WHEN `+f+`(a) COLLATE "C" < `+f+`(b) THEN -1 WHEN `+f+`(a) = `+f+`(b) THEN 0 ELSE 1 END
			FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(a, b, o) ORDER BY o`, as, bs)
		if err != nil {
			t.Fatal(err)
		}
		i, bad := 0, 0
		for rows.Next() {
			var got int
			if err := rows.Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := coll.Compare(as[i], bs[i]); got != want {
				bad++
				if bad < 10 {
					t.Errorf("%s: sort keys of %q and %q compare %d, the collation %d", name, as[i], bs[i], got, want)
				}
			}
			i++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if i != len(as) {
			t.Fatalf("%d results for %d pairs", i, len(as))
		}
	}
}
