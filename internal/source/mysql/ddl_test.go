package mysql

import (
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

func TestParseAlter(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string // table and ops; "" for not an ALTER TABLE
	}{
		{"ALTER TABLE t RENAME COLUMN a TO b", "db.t [{a b}]"},
		{"alter table `sh op`.`t``x` rename column `a b` to `ü`", "sh op.t`x [{a b ü}]"},
		{"ALTER TABLE t CHANGE a b varchar(10) DEFAULT 'x,y', CHANGE COLUMN IF EXISTS c d int", "db.t [{a b} {c d}]"},
		{"ALTER TABLE t DROP COLUMN a, DROP b, DROP IF EXISTS c", "db.t [{a } {b } {c }]"},
		{"ALTER TABLE t DROP PRIMARY KEY, DROP INDEX i, DROP KEY k, DROP FOREIGN KEY f, DROP CONSTRAINT c, DROP CHECK c", "db.t []"},
		{"ALTER TABLE t ADD COLUMN x int FIRST, MODIFY y bigint, RENAME TO u, RENAME INDEX a TO b", "db.t []"},
		{"ALTER ONLINE IGNORE TABLE IF EXISTS t /* c, DROP z */ ADD COLUMN (p int, q int), -- DROP y\n DROP r", "db.t [{r }]"},
		{"ALTER TABLE d2.t ADD c enum('a,b', 'it''s', 'x\\'y'), RENAME COLUMN c TO e", "d2.t [{c e}]"},
		{"# comment\nALTER TABLE t DROP COLUMN a", "db.t [{a }]"},
		{"CREATE TABLE t (a int)", ""},
		{"ALTER DATABASE d CHARACTER SET utf8mb4", ""},
		{"ALTER TABLE", ""},
		{"BEGIN", ""},
	} {
		a, ok := parseAlter("db", tc.query)
		got := ""
		if ok {
			got = fmt.Sprintf("%s.%s %v", a.table.Schema, a.table.Name, a.ops)
			if a.ops == nil {
				got = fmt.Sprintf("%s.%s []", a.table.Schema, a.table.Name)
			}
		}
		if got != tc.want {
			t.Errorf("parseAlter(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
}

// FuzzParseAlter: any statement parses without a panic, and a rename or
// drop it finds names a column that is in the statement.
func FuzzParseAlter(f *testing.F) {
	for _, s := range []string{"ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE `a``b`.c CHANGE `x` y int, DROP z",
		"ALTER TABLE t ADD c varchar(3) DEFAULT 'a''(', DROP /* x */ d", "alter table t drop column if exists", "ALTER TABLE 'x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		a, ok := parseAlter("db", q)
		if !ok {
			return
		}
		if a.table == (change.TableID{}) {
			t.Fatalf("%q: an ALTER TABLE without its table", q)
		}
		for _, op := range a.ops {
			if op.from == "" {
				t.Fatalf("%q: an op without its column: %+v", q, op)
			}
		}
	})
}
