package stream

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// Stored generated columns, which the log leaves out of every change: the
// destination holds the source's values after backfills, inserts, updates
// (also of a key) and deletes while streaming, and verify agrees. A
// PostgreSQL destination computes all three columns; SQLite computes the
// arithmetic and the concatenation, and the lower() column (SQLite folds
// ASCII only) takes the values read from the source. The table h already
// exists in the destination with plain columns, which the start converts.
// A rename of a column the expressions read is followed; a backfill while
// the table changes merges its chunks with re-read changes. The table k,
// keyed by a generated column, fails with the reason.
func TestGeneratedColumns(t *testing.T) {
	for _, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
				CREATE TABLE g (id int PRIMARY KEY, qty int, price bigint, name text, note varchar(20),
				  total bigint GENERATED ALWAYS AS (qty * price + 1) STORED,
				  label text GENERATED ALWAYS AS (name || '-' || note || '#' || id) STORED,
				  "Low Name" text GENERATED ALWAYS AS (lower(name)) STORED);
				INSERT INTO g (id, qty, price, name, note) SELECT i, i, 10 * i, 'Ñame ' || i, 'n' || i FROM generate_series(1, 40) i;
				CREATE TABLE h (id int PRIMARY KEY, a int, twice int GENERATED ALWAYS AS (a * 2) STORED);
				INSERT INTO h (id, a) SELECT i, i FROM generate_series(1, 20) i;
				CREATE TABLE k (a int, b int GENERATED ALWAYS AS (a + 1) STORED PRIMARY KEY);
				CREATE TABLE p (id int PRIMARY KEY, a int, b int);`})
			// h as an earlier version of tidemark created it: plain columns;
			// p made by hand with a generated column the source does not have.
			if dest == "postgres" {
				e.execInDest(`CREATE TABLE h (id int PRIMARY KEY, a int, twice int)`, `INSERT INTO h VALUES (1, 1, NULL)`,
					`CREATE TABLE p (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 3) STORED)`)
			} else {
				e.execInDest(`CREATE TABLE h (id INTEGER NOT NULL, a INTEGER, twice INTEGER, PRIMARY KEY (id))`, `INSERT INTO h VALUES (1, 1, NULL)`,
					`CREATE TABLE p (id INTEGER NOT NULL, a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 3) STORED, PRIMARY KEY (id))`)
			}
			e.start()
			e.waitLoaded("g")
			e.waitLoaded("h")
			e.exec(`INSERT INTO g (id, qty, price, name, note) VALUES (41, 3, 4, 'ÄB', 'x'), (42, NULL, 1, NULL, 'y')`)
			e.exec(`UPDATE g SET qty = qty + 100, name = 'Ünï ' || id WHERE id % 3 = 0`)
			e.exec(`UPDATE g SET id = 1000 + id, note = 'moved' WHERE id IN (5, 7)`)
			e.exec(`DELETE FROM g WHERE id IN (2, 41)`)
			e.exec(`BEGIN; UPDATE g SET price = 0 WHERE id = 4; UPDATE g SET price = 9 WHERE id = 4; COMMIT`)
			e.exec(`INSERT INTO h (id, a) VALUES (21, 7)`)
			e.exec(`UPDATE h SET a = a + 1 WHERE id < 5`)
			e.assertConverged("g")
			e.assertConverged("h")
			e.assertVerified(pubTable("g"), pubTable("h"))
			e.waitFailed(pubTable("k"), `key column "b" is a generated column`, "REPLICA IDENTITY USING INDEX")
			e.waitFailed(pubTable("p"), `column "b" is a generated column in the destination`, "the source column is not a generated column")

			e.exec(`ALTER TABLE g RENAME COLUMN name TO "Full name"`)
			e.exec(`UPDATE g SET "Full name" = 'Rë ' || id, qty = 7 WHERE id % 4 = 1`)
			e.exec(`INSERT INTO g (id, qty, price, "Full name", note) VALUES (43, 2, 2, 'Nëw', 'z')`)
			e.schemaWaitColumns("g", "id", "qty", "price", "Full name", "note", "total", "label", "Low Name")
			if _, err := e.s.Initiate(e.ctx, []change.TableID{pubTable("g")}, store.StartedByCLI, nil); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				e.exec(`UPDATE g SET price = price + 1, "Full name" = "Full name" || 'x' WHERE id = $1`, 1+i%10)
			}
			e.waitLoaded("g")
			e.assertConverged("g")
			e.assertVerified(pubTable("g"))
			want := map[string][]string{"postgres": {"total", "label", "Low Name"}, "sqlite": {"total", "label"}}[dest]
			if got := e.destGenerated("g"); !slices.Equal(got, want) {
				t.Errorf("generated columns of the destination's g: %v, want %v", got, want)
			}
			if got := e.destGenerated("h"); !slices.Equal(got, []string{"twice"}) {
				t.Errorf("generated columns of the destination's h: %v, want [twice]", got)
			}
		})
	}
}

// destGenerated lists the destination table's generated columns.
func (e *env) destGenerated(table string) []string {
	e.t.Helper()
	if e.dest == "postgres" {
		return e.schemaDestQuery(fmt.Sprintf(`SELECT attname::text FROM pg_attribute
			WHERE attrelid = 'public.%s'::regclass AND attgenerated = 's' AND NOT attisdropped ORDER BY attnum`, table))
	}
	return e.schemaDestQuery(fmt.Sprintf(`SELECT name FROM pragma_table_xinfo('%s') WHERE hidden IN (2, 3) ORDER BY cid`, table))
}
