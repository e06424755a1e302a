package stream

import (
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// identitySetup has one table per way of keying rows, each with rows the
// first backfill copies. Text keys are C-collated so that SQLite may hold
// them.
const identitySetup = `
	CREATE TABLE pk_default (id int PRIMARY KEY, code text NOT NULL, v int);
	CREATE TABLE full_keys (code text COLLATE "C" NOT NULL, v int);
	ALTER TABLE full_keys REPLICA IDENTITY FULL;
	CREATE TABLE full_unique (id int NOT NULL, code text, v int);
	CREATE UNIQUE INDEX full_unique_id ON full_unique (id);
	ALTER TABLE full_unique REPLICA IDENTITY FULL;
	CREATE TABLE using_index (a int NOT NULL, b text COLLATE "C" NOT NULL, v int, extra int);
	CREATE UNIQUE INDEX using_index_ab ON using_index (a, b) INCLUDE (extra);
	ALTER TABLE using_index REPLICA IDENTITY USING INDEX using_index_ab;
	CREATE TABLE index_over_pk (id int PRIMARY KEY, code int NOT NULL, v int);
	CREATE UNIQUE INDEX index_over_pk_code ON index_over_pk (code);
	ALTER TABLE index_over_pk REPLICA IDENTITY USING INDEX index_over_pk_code;
	INSERT INTO pk_default SELECT g, 'c' || g, g FROM generate_series(1, 20) g;
	INSERT INTO full_keys SELECT 'c' || g, g FROM generate_series(1, 20) g;
	INSERT INTO full_unique SELECT g, 'c' || g, g FROM generate_series(1, 20) g;
	INSERT INTO using_index SELECT g % 4, 'b' || g, g, g FROM generate_series(1, 20) g;
	INSERT INTO index_over_pk SELECT g, g * 10, g FROM generate_series(1, 20) g;

	CREATE TABLE no_key (v int);
	CREATE TABLE full_no_key (v int, u int); ALTER TABLE full_no_key REPLICA IDENTITY FULL;
	CREATE UNIQUE INDEX full_no_key_u ON full_no_key (u); -- nullable: not a row key
	CREATE TABLE nothing_ident (id int PRIMARY KEY); ALTER TABLE nothing_ident REPLICA IDENTITY NOTHING;
	INSERT INTO no_key VALUES (1), (1); INSERT INTO full_no_key VALUES (1, 1);`

// identityChanges writes, per keyed table, an insert, an update of a
// value, an update of the key (a row moving to a key of another chunk) and a
// delete.
var identityChanges = map[string][]string{
	"pk_default": {`INSERT INTO pk_default VALUES (100, 'new', 0)`, `UPDATE pk_default SET v = -v WHERE id % 3 = 0`,
		`UPDATE pk_default SET id = id + 1000 WHERE id IN (2, 7)`, `DELETE FROM pk_default WHERE id IN (4, 100)`},
	"full_keys": {`INSERT INTO full_keys VALUES ('new', 0)`, `UPDATE full_keys SET v = -v WHERE v % 3 = 0`,
		`UPDATE full_keys SET code = 'z' || code WHERE code IN ('c2', 'c7')`, `DELETE FROM full_keys WHERE code IN ('c4', 'new')`},
	"full_unique": {`INSERT INTO full_unique VALUES (100, NULL, 0)`, `UPDATE full_unique SET code = NULL WHERE id % 3 = 0`,
		`UPDATE full_unique SET id = id + 1000 WHERE id IN (2, 7)`, `DELETE FROM full_unique WHERE id IN (4, 100)`},
	"using_index": {`INSERT INTO using_index VALUES (9, 'new', 0, 0)`, `UPDATE using_index SET v = -v, extra = 0 WHERE v % 3 = 0`,
		`UPDATE using_index SET b = 'z' || b, a = a + 10 WHERE v IN (2, 7)`, `DELETE FROM using_index WHERE v = 4 OR b = 'new'`},
	"index_over_pk": {`INSERT INTO index_over_pk VALUES (100, 1, 0)`, `UPDATE index_over_pk SET v = -v WHERE id % 3 = 0`,
		`UPDATE index_over_pk SET code = code + 1000, id = id + 1000 WHERE id IN (2, 7)`, `DELETE FROM index_over_pk WHERE id IN (4, 100)`},
}

// TestReplicaIdentityKinds: a table keyed by its primary key (replica
// identity DEFAULT), by configured keys or a unique NOT NULL index under
// REPLICA IDENTITY FULL, or by its replica identity index (USING INDEX,
// also when a primary key exists besides it) is backfilled in several
// chunks and streams inserts, updates, key changes and deletes: the
// destination equals the source. A table without a usable row key is
// refused, failed with how to fix it, and not streamed.
func TestReplicaIdentityKinds(t *testing.T) {
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: identitySetup, yaml: `
keys:
  public.full_keys: [code]
backfill: {mode: automatic, chunk_size: 3}`})
			e.start()
			keyed := []string{"pk_default", "full_keys", "full_unique", "using_index", "index_over_pk"}
			for _, name := range keyed {
				e.waitLoaded(name)
				e.assertConverged(name)
			}
			wantKeys(t, e, "full_unique", "id")
			wantKeys(t, e, "using_index", "a", "b")
			wantKeys(t, e, "index_over_pk", "code")
			for _, name := range keyed {
				for _, sql := range identityChanges[name] {
					e.exec(sql)
				}
			}
			for _, name := range keyed {
				e.assertConverged(name)
			}
			// A second backfill of the changed tables is a reset: same rows.
			var ids []change.TableID
			for _, name := range keyed {
				ids = append(ids, pubTable(name))
			}
			e.backfill(ids...)
			for _, name := range keyed {
				e.assertConverged(name)
			}
			e.waitFailed(pubTable("no_key"), "no usable row key", "primary key", "REPLICA IDENTITY USING INDEX", "keys:")
			e.waitFailed(pubTable("full_no_key"), "no usable row key", "keys:")
			e.waitFailed(pubTable("nothing_ident"), "replica identity", "REPLICA IDENTITY")
			// Writes to the refused tables go on at the source, and nothing
			// of them reaches the destination.
			e.exec(`INSERT INTO no_key VALUES (2); UPDATE no_key SET v = 3; DELETE FROM nothing_ident`)
			for _, name := range e.destTables() {
				if name == "no_key" || name == "public.no_key" || name == "full_no_key" || name == "public.full_no_key" {
					t.Errorf("refused table %s has a destination table", name)
				}
			}
		})
	}
}

func wantKeys(t *testing.T, e *env, table string, cols ...string) {
	t.Helper()
	tb := e.s.lookup(pubTable(table))
	if tb == nil {
		t.Fatalf("%s is not streamed", table)
	}
	var got []string
	for _, c := range tb.KeyColumns() {
		got = append(got, c.Name)
	}
	if !slices.Equal(got, cols) {
		t.Fatalf("%s is keyed by %v, want %v", table, got, cols)
	}
}
