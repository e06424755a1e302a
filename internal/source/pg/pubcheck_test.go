package pg

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// TestExistingPublication: with publication_mode existing, a DBA's
// publication is used as it is. What would lose changes is refused with
// the fix (missing, operations left out, row filters, column lists,
// partitions published under their own names, tables missing); a good one
// is accepted and never altered, by a user that owns none of the tables.
func TestExistingPublication(t *testing.T) {
	ctx := context.Background()
	dsn, conn := testDB(t, `
		CREATE TABLE a (id int PRIMARY KEY, v text);
		CREATE TABLE b (id int PRIMARY KEY, v text);
		CREATE TABLE other (id int PRIMARY KEY);
		CREATE TABLE later (id int PRIMARY KEY);
		CREATE TABLE parts (id int PRIMARY KEY) PARTITION BY RANGE (id);
		CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (100);
		DO $$ BEGIN
		  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'reader') THEN CREATE ROLE reader LOGIN REPLICATION; END IF;
		END $$;
		GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader;`)
	readerDSN := strings.Replace(dsn, "postgres@", "reader@", 1)
	src, err := Open(ctx, Config{DSN: readerDSN, Publication: "dba_pub", PublicationExisting: true, Slot: "s"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tables := []change.TableID{{Schema: "public", Name: "a"}, {Schema: "public", Name: "b"}, {Schema: "public", Name: "parts"}}
	refused := func(wants ...string) {
		t.Helper()
		err := src.PrepareCapture(ctx, tables)
		if err == nil || !IsPermanent(err) {
			t.Fatalf("PrepareCapture: %v, want a permanent refusal", err)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal %q: want %q in it", err, w)
			}
		}
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	pubTables := func() []string {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT tablename::text FROM pg_publication_tables WHERE pubname = 'dba_pub' ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		return names
	}

	refused("publication dba_pub does not exist", `CREATE PUBLICATION "dba_pub" FOR TABLE "public"."a", "public"."b", "public"."parts" WITH (publish_via_partition_root = true);`)
	if exists := pubTables(); exists != nil {
		t.Fatalf("tidemark created the publication: %v", exists)
	}

	exec(`CREATE PUBLICATION dba_pub FOR TABLE a WHERE (id > 10), b (id), parts_1 WITH (publish = 'insert, update')`)
	refused("does not publish delete, truncate", "SET (publish = 'insert, update, delete, truncate')",
		"row filters on public.a", "column lists on public.b",
		"lacks 1 of the tables to stream (public.parts)",
		"ADD TABLE")

	exec(`ALTER PUBLICATION dba_pub SET TABLE a, b, parts, other`)
	exec(`ALTER PUBLICATION dba_pub SET (publish = 'insert, update, delete, truncate')`)
	refused("publish_via_partition_root is off", "the changes of public.parts would reach no object", "SET (publish_via_partition_root = true)")

	exec(`ALTER PUBLICATION dba_pub SET (publish_via_partition_root = true)`)
	if err := src.PrepareCapture(ctx, tables); err != nil {
		t.Fatalf("a publication that carries every change: %v", err)
	}
	// Used as it is: the table the stream does not name stays in it.
	if got := pubTables(); !slices.Equal(got, []string{"a", "b", "other", "parts"}) {
		t.Errorf("the publication's tables are %v after PrepareCapture, want them untouched", got)
	}

	// A table found later that the publication lacks fails only itself.
	err = src.AddCapture(ctx, change.TableID{Schema: "public", Name: "later"})
	if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), `ALTER PUBLICATION "dba_pub" ADD TABLE "public"."later"`) {
		t.Errorf("AddCapture of a table not in the publication: %v", err)
	}
	if err := src.AddCapture(ctx, change.TableID{Schema: "public", Name: "other"}); err != nil {
		t.Errorf("AddCapture of a table in the publication: %v", err)
	}
	if got := pubTables(); !slices.Equal(got, []string{"a", "b", "other", "parts"}) {
		t.Errorf("the publication's tables are %v after AddCapture, want them untouched", got)
	}

	// FOR ALL TABLES takes later tables by itself.
	exec(`DROP PUBLICATION dba_pub; CREATE PUBLICATION dba_pub FOR ALL TABLES WITH (publish_via_partition_root = true)`)
	if err := src.AddCapture(ctx, change.TableID{Schema: "public", Name: "later"}); err != nil {
		t.Errorf("AddCapture with FOR ALL TABLES: %v", err)
	}
}
