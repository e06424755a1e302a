package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// toastColumns are the columns of toasty that hold values stored out of
// line: text, jsonb, numeric and int[] with STORAGE EXTERNAL (no
// compression), and bytea with the default EXTENDED storage, whose random
// bytes do not compress, so it goes out of line as it is.
var toastColumns = []string{"doc", "blob", "js", "num", "arr"}

// toastThreshold is PostgreSQL's TOAST_TUPLE_THRESHOLD with 8 kB pages:
// the toaster moves values out of line until a row fits under it.
const toastThreshold = 2032

const toastSetup = `
CREATE FUNCTION random_bytes(n int) RETURNS bytea LANGUAGE sql AS
  $$ SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, (n + 15) / 16) $$;
CREATE FUNCTION random_ints(n int) RETURNS int[] LANGUAGE sql AS
  $$ SELECT array_agg((random() * 2e9)::int) FROM generate_series(1, n) $$;
CREATE FUNCTION big_row(id int) RETURNS TABLE (id int, v int, doc text, blob bytea, js jsonb, num numeric, arr int[])
  LANGUAGE sql AS $$ SELECT id, id, encode(random_bytes(3000), 'hex'), random_bytes(4000),
    jsonb_build_object('k', encode(random_bytes(2000), 'hex'), 'id', id),
    ('-0.' || translate(encode(random_bytes(3000), 'hex'), 'abcdef', '123456'))::numeric,
    random_ints(1000) $$;
CREATE TABLE toasty (id int PRIMARY KEY, v int NOT NULL, doc text, blob bytea, js jsonb, num numeric, arr int[]);
ALTER TABLE toasty ALTER COLUMN doc SET STORAGE EXTERNAL, ALTER COLUMN js SET STORAGE EXTERNAL,
  ALTER COLUMN num SET STORAGE EXTERNAL, ALTER COLUMN arr SET STORAGE EXTERNAL;
INSERT INTO toasty SELECT b.* FROM generate_series(1, 6) g, big_row(g) b;
CREATE TABLE barrier (n int PRIMARY KEY);`

// TestUnchangedToastKept: an UPDATE that leaves an out-of-line value alone
// carries the unchanged-TOAST marker instead of the value, and the
// destination keeps the value it has — also when the update moves the key,
// when the row arrived through the stream rather than the backfill, and
// when one transaction updates the row twice. The test first proves the
// values are stored out of line, and reads the marker in the log itself.
func TestUnchangedToastKept(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: toastSetup, yaml: "backfill: {mode: automatic, chunk_size: 2}"})
			e.assertStoredOutOfLine(6)
			e.start()
			e.waitLoaded("toasty")
			e.waitLoaded("barrier")
			id := change.TableID{Schema: "public", Name: "toasty"}
			tbl := e.s.lookup(id)
			e.checkToasty(tbl, "after the backfill", 6)
			peek := e.probeSlot("toasty")
			for _, stmt := range []string{
				`UPDATE toasty SET v = v + 1`,                                                // 6 rows, every big column unchanged
				`UPDATE toasty SET id = id + 100, v = -v WHERE id = 1`,                       // a key move carries them over
				`UPDATE toasty SET doc = doc || 'x', v = v + 1 WHERE id = 2`,                 // doc changes, the rest does not
				`INSERT INTO toasty SELECT * FROM big_row(7)`,                                // a row the stream delivers
				`UPDATE toasty SET v = 70 WHERE id = 7`,                                      // and then leaves unchanged
				`UPDATE toasty SET v = 0 WHERE id = 3; UPDATE toasty SET v = 1 WHERE id = 3`, // twice in one transaction
				`DELETE FROM toasty WHERE id = 4`,
			} {
				e.exec(stmt)
			}
			e.barrier(1)
			e.checkToasty(tbl, "after updates that left big values unchanged", 6)
			// The log carried the marker, not the values: 6+1+1+2 updates
			// left every big column unchanged, and one more left all but doc.
			want := map[string]int{"doc": 10, "blob": 11, "js": 11, "num": 11, "arr": 11}
			if got := peek(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("unchanged-TOAST markers per column in the log: %v, want %v", got, want)
			}
			// A second backfill, over the destination as it is, keeps them.
			if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByCLI, nil); err != nil {
				t.Fatal(err)
			}
			e.waitLoaded("toasty")
			e.checkToasty(tbl, "after a second backfill", 6)
			e.verifyClean(2)
		})
	}
}

// checkToasty compares the destination's toasty with the source's, once:
// the caller made sure the destination has caught up.
func (e *env) checkToasty(t *change.Table, phase string, wantRows int) {
	e.t.Helper()
	src := e.readText(e.textConn(e.srcDSN), t)
	if len(src) != wantRows {
		e.t.Fatalf("%s: the source has %d rows, want %d", phase, len(src), wantRows)
	}
	for _, r := range src {
		for i, c := range t.Columns {
			if r[i].Null {
				e.t.Fatalf("%s: source row %s has no %s", phase, r[0].Text, c.Name)
			}
		}
	}
	if d := diffText(t, src, e.destRows(t)); d != "" {
		e.t.Errorf("%s: the destination lost or changed values:\n%s", phase, d)
	}
	if e.dest == "postgres" {
		if d := diffText(t, src, e.readText(e.textConn(e.dstDSN), t)); d != "" {
			e.t.Errorf("%s: the destination's text output differs:\n%s", phase, d)
		}
	}
}

// assertStoredOutOfLine proves that every big value of toasty's rows is
// stored out of line, so that updates leaving it alone really send the
// marker: each is larger than the TOAST threshold, doc and blob report
// exactly their data length (an inline value counts its 4-byte header too,
// a compressed one is smaller), and the TOAST table holds one value per
// row and column.
func (e *env) assertStoredOutOfLine(rows int) {
	e.t.Helper()
	sizes := make([]string, len(toastColumns))
	for i, c := range toastColumns {
		sizes[i] = fmt.Sprintf("pg_column_size(%s)", c)
	}
	res, err := e.src.Query(e.ctx, "SELECT id, octet_length(doc), octet_length(blob), "+strings.Join(sizes, ", ")+" FROM toasty")
	if err != nil {
		e.t.Fatal(err)
	}
	for res.Next() {
		var id, docLen, blobLen int
		size := make([]int, len(toastColumns))
		dest := []any{&id, &docLen, &blobLen}
		for i := range size {
			dest = append(dest, &size[i])
		}
		if err := res.Scan(dest...); err != nil {
			e.t.Fatal(err)
		}
		for i, c := range toastColumns {
			if size[i] <= toastThreshold {
				e.t.Errorf("row %d: %s is %d bytes, not over the TOAST threshold", id, c, size[i])
			}
		}
		if size[0] != docLen || size[1] != blobLen {
			e.t.Errorf("row %d: doc takes %d bytes for %d, blob %d for %d: not uncompressed out of line", id, size[0], docLen, size[1], blobLen)
		}
	}
	if err := res.Err(); err != nil {
		e.t.Fatal(err)
	}
	var toastRel string
	if err := e.src.QueryRow(e.ctx, "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'toasty'::regclass").Scan(&toastRel); err != nil {
		e.t.Fatal(err)
	}
	var values int
	if err := e.src.QueryRow(e.ctx, "SELECT count(DISTINCT chunk_id) FROM "+toastRel).Scan(&values); err != nil {
		e.t.Fatal(err)
	}
	if values != rows*len(toastColumns) {
		e.t.Fatalf("%s holds %d values, want %d (%d rows × %d columns out of line)", toastRel, values, rows*len(toastColumns), rows, len(toastColumns))
	}
}

// probeSlot creates a logical slot of its own on a publication of table,
// beside the stream's, and returns a function that reads what pgoutput
// sent for the table since: the number of updates in which each column
// was the unchanged-TOAST marker ('u') rather than a value.
func (e *env) probeSlot(table string) func() map[string]int {
	e.t.Helper()
	slot := "probe_" + e.cfg.Name
	e.exec("CREATE PUBLICATION probe FOR TABLE " + table)
	e.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
	e.t.Cleanup(func() {
		if _, err := e.src.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot); err != nil {
			e.t.Errorf("drop slot %s: %v", slot, err)
		}
	})
	return func() map[string]int {
		rows, err := e.src.Query(e.ctx, `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
			'proto_version', '1', 'publication_names', 'probe')`, slot)
		if err != nil {
			e.t.Fatal(err)
		}
		defer rows.Close()
		columns := map[uint32][]string{}
		markers := map[string]int{}
		for rows.Next() {
			var data []byte
			if err := rows.Scan(&data); err != nil {
				e.t.Fatal(err)
			}
			msg, err := pglogrepl.Parse(data)
			if err != nil {
				e.t.Fatalf("parse pgoutput message: %v", err)
			}
			switch m := msg.(type) {
			case *pglogrepl.RelationMessage:
				names := make([]string, len(m.Columns))
				for i, c := range m.Columns {
					names[i] = c.Name
				}
				columns[m.RelationID] = names
			case *pglogrepl.UpdateMessage:
				for i, c := range m.NewTuple.Columns {
					if c.DataType == pglogrepl.TupleDataTypeToast {
						markers[columns[m.RelationID][i]]++
					}
				}
			}
		}
		if err := rows.Err(); err != nil {
			e.t.Fatal(err)
		}
		return markers
	}
}

// TestUnchangedToastKey: an update leaves a key column that is stored out
// of line unchanged. pgoutput then sends the marker for the key column of
// the new row, and the key's value only in the old-key tuple (which it logs
// because the key has external data); with REPLICA IDENTITY FULL, every
// unchanged out-of-line value is in the old tuple. The row keeps its key
// and values in the destination, even one that lacked the row.
func TestUnchangedToastKey(t *testing.T) {
	for _, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: automatic}", setup: `
CREATE FUNCTION random_bytes(n int) RETURNS bytea LANGUAGE sql AS
  $$ SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, (n + 15) / 16) $$;
CREATE TABLE bigkey (k text PRIMARY KEY, v int NOT NULL, big text);
ALTER TABLE bigkey ALTER COLUMN k SET STORAGE EXTERNAL, ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO bigkey SELECT encode(random_bytes(1200), 'hex'), g, encode(random_bytes(3000), 'hex') FROM generate_series(1, 3) g;
CREATE TABLE fullident (id int PRIMARY KEY, v int NOT NULL, big text);
ALTER TABLE fullident REPLICA IDENTITY FULL, ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO fullident SELECT g, g, encode(random_bytes(3000), 'hex') FROM generate_series(1, 3) g;
CREATE TABLE barrier (n int PRIMARY KEY);`})
			e.assertUncompressedOutOfLine("bigkey", "k")
			e.assertUncompressedOutOfLine("fullident", "big")
			e.start()
			e.waitLoaded("bigkey")
			e.waitLoaded("fullident")
			// The destination loses one row of each table, so an update must
			// bring the whole row.
			e.execInDest(`DELETE FROM bigkey WHERE v = 3`, `DELETE FROM fullident WHERE id = 3`)
			e.exec(`UPDATE bigkey SET v = v + 10`)
			e.exec(`UPDATE fullident SET v = v + 10`)
			e.exec(`INSERT INTO bigkey SELECT encode(random_bytes(1200), 'hex'), 4, 'small'`)
			e.exec(`UPDATE bigkey SET v = 40 WHERE v = 4`)
			e.barrier(1)
			for _, table := range []string{"bigkey", "fullident"} {
				tbl := e.s.lookup(change.TableID{Schema: "public", Name: table})
				src := e.readText(e.textConn(e.srcDSN), tbl)
				got := e.destRows(tbl)
				// The lost bigkey row comes back without big, whose value the
				// log did not carry.
				if table == "bigkey" {
					for i, r := range src {
						if r[1].Text == "13" {
							src[i] = change.Row{r[0], r[1], change.Null}
						}
					}
				}
				if d := diffText(tbl, src, got); d != "" {
					t.Errorf("%s: the destination differs from the source:\n%s", table, d)
				}
			}
		})
	}
}

// assertUncompressedOutOfLine checks that every value of a text column is
// over the TOAST threshold and takes exactly its length: stored out of line
// without compression (inline it would count a 4-byte header too).
func (e *env) assertUncompressedOutOfLine(table, column string) {
	e.t.Helper()
	var bad int
	q := fmt.Sprintf("SELECT count(*) FILTER (WHERE octet_length(%[1]s) <= %[2]d OR pg_column_size(%[1]s) <> octet_length(%[1]s)) FROM %[3]s",
		column, toastThreshold, table)
	if err := e.src.QueryRow(e.ctx, q).Scan(&bad); err != nil {
		e.t.Fatal(err)
	}
	if bad > 0 {
		e.t.Fatalf("%d values of %s.%s are not stored uncompressed out of line", bad, table, column)
	}
}
