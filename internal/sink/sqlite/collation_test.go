package sqlite

import (
	"errors"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// TestCheckKeyOrderMySQLCollations: SQLite takes MySQL text keys whose
// collation package collate reproduces (declared with the registered
// collation) and bytewise ones, and refuses the UCA collations, MySQL 8's
// utf8mb4_0900_ai_ci among them, with the fix.
func TestCheckKeyOrderMySQLCollations(t *testing.T) {
	cases := []struct {
		collation string
		byteOrder bool
		want      string // the key's declared collation; "-" refused
	}{
		{"utf8mb4_general_ci", false, "tidemark_utf8mb4_general_ci"},
		{"latin1_swedish_nopad_ci", false, "tidemark_latin1_swedish_nopad_ci"},
		{"utf8mb4_bin", true, "tidemark_utf8mb4_bin"},
		{"utf8mb4_nopad_bin", true, ""},
		{"utf8mb4_uca1400_ai_ci", false, "tidemark_utf8mb4_uca1400_ai_ci"},
		{"utf8mb4_unicode_nopad_ci", false, "tidemark_utf8mb4_unicode_nopad_ci"},
		{"utf8mb4_0900_ai_ci", false, "-"},
		{"utf8mb4_german2_ci", false, "-"},
		{"utf8mb4_uca1400_as_ci", false, "-"},
	}
	for _, c := range cases {
		tbl := &change.Table{ID: change.TableID{Schema: "db", Name: "t"}, Key: []int{0}, Columns: []change.Column{{
			Name: "k", Type: "character varying(20)", Native: "varchar(20)", BaseOID: 1043,
			Collation: c.collation, ByteOrder: c.byteOrder,
		}}}
		err := checkKeyOrder(tbl)
		if c.want == "-" {
			if !errors.Is(err, sink.ErrKeyOrder) {
				t.Errorf("%s: %v, want ErrKeyOrder", c.collation, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.collation, err)
			continue
		}
		ts, err := newTableSQL(tbl)
		if err != nil {
			t.Fatal(err)
		}
		if ts.coll[0] != c.want {
			t.Errorf("%s: declared with %q, want %q", c.collation, ts.coll[0], c.want)
		}
	}
}
