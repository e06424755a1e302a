package pg

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// TestDescribeMany: tables described together get what each gets alone,
// each its own error: a table keyed by its primary key, by its replica
// identity index, by configured keys, a partitioned one whose partition's
// identity lacks the key, one without a key, one keyed by a generated
// column, a configured key column that does not exist, and a table the
// source does not have; in an order that is not the catalog's.
func TestDescribeMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, _ := testDB(t, `
		CREATE TABLE plain (id int PRIMARY KEY, v text COLLATE "C", n numeric(9,2));
		CREATE TABLE ident (a int NOT NULL, b int NOT NULL, id int PRIMARY KEY);
		CREATE UNIQUE INDEX ident_ab ON ident (b, a);
		ALTER TABLE ident REPLICA IDENTITY USING INDEX ident_ab;
		CREATE TABLE keyless (v text);
		CREATE TABLE configured (x int, y text);
		ALTER TABLE configured REPLICA IDENTITY FULL;
		CREATE TABLE genkey (a int, g int GENERATED ALWAYS AS (a * 2) STORED);
		ALTER TABLE genkey REPLICA IDENTITY FULL;
		CREATE TABLE parted (id int, day date, PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
		CREATE TABLE parted_a PARTITION OF parted FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
		CREATE TABLE parted_b PARTITION OF parted FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
		CREATE UNIQUE INDEX parted_b_day ON parted_b (day, id);
		ALTER TABLE parted_b REPLICA IDENTITY NOTHING;
		CREATE TABLE "Odd ""name""" ("Key" bigint PRIMARY KEY);`)
	src := openSource(t, dsn, ReadTimeouts{})
	id := func(name string) change.TableID { return change.TableID{Schema: "public", Name: name} }
	ids := []change.TableID{id("parted"), id("missing"), id("plain"), id("keyless"), id(`Odd "name"`),
		id("configured"), id("genkey"), id("ident"), id("badkey")}
	keys := map[change.TableID][]string{id("configured"): {"x"}, id("genkey"): {"g"}, id("badkey"): {"nope"}}
	if _, err := src.pool.Exec(ctx, `CREATE TABLE badkey (v int)`); err != nil {
		t.Fatal(err)
	}
	tables, errs, err := src.DescribeMany(ctx, ids, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(ids) || len(errs) != len(ids) {
		t.Fatalf("%d tables and %d errors for %d ids", len(tables), len(errs), len(ids))
	}
	wantErr := map[string]string{
		"parted":  "replica identity of its partition public.parted_b",
		"missing": ErrNoTable.Error(),
		"keyless": ErrNoKey.Error(),
		"genkey":  "is a generated column",
		"badkey":  `key column "nope" does not exist`,
	}
	// What callers tell the errors apart by.
	wantIs := map[string]error{"parted": ErrNoKey, "missing": ErrNoTable, "keyless": ErrNoKey, "genkey": ErrGeneratedKey}
	wantKey := map[string]string{"plain": "id", "ident": "b,a", `Odd "name"`: "Key", "configured": "x"}
	for i, tid := range ids {
		alone, aloneErr := src.Describe(ctx, tid, keys[tid])
		if !reflect.DeepEqual(tables[i], alone) || text(errs[i]) != text(aloneErr) {
			t.Errorf("%s: described with others %+v, %v; alone %+v, %v", tid, tables[i], errs[i], alone, aloneErr)
		}
		if want, ok := wantErr[tid.Name]; ok {
			if errs[i] == nil || !strings.Contains(errs[i].Error(), want) || tables[i] != nil {
				t.Errorf("%s: %+v, error %v; want none, an error saying %q", tid, tables[i], errs[i], want)
			}
			if is := wantIs[tid.Name]; is != nil && !errors.Is(errs[i], is) {
				t.Errorf("%s: error %v is not %v", tid, errs[i], is)
			}
			continue
		}
		if errs[i] != nil || tables[i] == nil || tables[i].ID != tid {
			t.Fatalf("%s: %+v, %v", tid, tables[i], errs[i])
		}
		var key []string
		for _, c := range tables[i].KeyColumns() {
			key = append(key, c.Name)
		}
		if got := strings.Join(key, ","); got != wantKey[tid.Name] {
			t.Errorf("%s: key %s, want %s", tid, got, wantKey[tid.Name])
		}
	}
	if c := tables[2].Columns; len(c) != 3 || c[1].Collation != "C" || c[2].Type != "numeric(9,2)" {
		t.Errorf("plain's columns: %+v", c)
	}
}

// text is an error's text, "" for none.
func text(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
