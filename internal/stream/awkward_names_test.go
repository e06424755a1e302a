package stream

import (
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

// Tables whose names hold upper case, spaces, both quotes, dots, Unicode and
// SQL keywords, and one whose names are SQL injections aimed at victim.
var (
	quotedTable  = change.TableID{Schema: "Select Schema", Name: `My "Quoted" Table.v2`}
	unicodeTable = change.TableID{Schema: "Select Schema", Name: "Ünïcødé 表"}
	fullTable    = change.TableID{Schema: "Select Schema", Name: "full ident"}
	dotTable     = change.TableID{Schema: "weird.schema", Name: "t"}
	hostileTable = pubTable(`x"; DROP TABLE victim; --`)
	victimTable  = pubTable("victim")
	ignoredTable = change.TableID{Schema: "Select Schema", Name: "ignored"}
)

const namesSetup = `
	CREATE SCHEMA "Select Schema";
	CREATE TABLE "Select Schema"."My ""Quoted"" Table.v2" (
	  "Order" int PRIMARY KEY, "user" text, "naïve col" text, "a'b" text, "Select" int);
	INSERT INTO "Select Schema"."My ""Quoted"" Table.v2"
	  SELECT g, 'user ' || g, 'naïve ' || g, 'it''s "' || g || '"', g FROM generate_series(1, 9) g;
	CREATE TABLE "Select Schema"."Ünïcødé 表" ("ключ" text COLLATE "C" PRIMARY KEY, "значение" int);
	INSERT INTO "Select Schema"."Ünïcødé 表" VALUES ('ä', 1), ('日本', 2), ('a"b', 3), ('c''d', 4);
	CREATE TABLE "Select Schema"."full ident" ("user" text COLLATE "C" NOT NULL, "a'b" int NOT NULL, "from" text);
	ALTER TABLE "Select Schema"."full ident" REPLICA IDENTITY FULL;
	INSERT INTO "Select Schema"."full ident" SELECT 'u' || (g % 3), g, 'f' || g FROM generate_series(1, 9) g;
	CREATE TABLE "Select Schema".ignored (id int PRIMARY KEY);
	CREATE SCHEMA "weird.schema";
	CREATE TABLE "weird.schema".t (id int PRIMARY KEY, "group" text);
	INSERT INTO "weird.schema".t VALUES (1, 'g');
	CREATE TABLE victim (id int PRIMARY KEY);
	INSERT INTO victim SELECT generate_series(1, 5);
	CREATE TYPE "k""); DROP TABLE victim; --" AS ENUM ('a', 'b''c');
	CREATE TABLE "x""; DROP TABLE victim; --" ("a); DELETE FROM victim; --" int PRIMARY KEY, "'); DELETE FROM victim; --" text,
	  kind "k""); DROP TABLE victim; --");
	INSERT INTO "x""; DROP TABLE victim; --" VALUES (1, ''');DELETE FROM victim;--', 'a'), (2, '"; DROP TABLE victim; --', 'b''c');`

// namesPatterns name the awkward tables the way a user's YAML does.
const namesPatterns = `
include: ['"Select Schema".*', 'public.*', '"weird.schema".t']
exclude: ['"Select Schema".ign*']
keys:
  '"Select Schema"."full ident"': [user, "a'b"]`

// TestAwkwardIdentifiers: tables and columns named with upper case,
// spaces, quotes of both kinds, dots, Unicode and SQL keywords, in a schema
// named like a keyword, matched by quoted include and exclude patterns and
// keyed by a quoted keys entry, through a publication whose name needs
// quoting too, are backfilled, streamed and verified into both destinations.
// Names built as SQL injections (of a table, its columns, a column's type
// and the publication) are only ever names: the victim table keeps its rows
// on both sides and the hostile table replicates like any other.
func TestAwkwardIdentifiers(t *testing.T) {
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: namesSetup, yaml: "backfill: {mode: automatic, chunk_size: 2}"})
			e.setPatterns(namesPatterns)
			e.cfg.Source.Publication = `Pub "Q", 'x'; DROP TABLE victim; --`
			e.start()
			all := []change.TableID{quotedTable, unicodeTable, fullTable, dotTable, hostileTable, victimTable}
			if ids := e.objectIDs(); len(ids) != len(all) || hasTable(ids, ignoredTable) {
				t.Fatalf("objects %v, want %v", ids, all)
			}
			for _, id := range all {
				e.waitLoadedID(id)
				e.assertConvergedID(id)
			}
			e.exec(`INSERT INTO "Select Schema"."My ""Quoted"" Table.v2" VALUES (100, 'user', 'naïve', '''; --', 0)`)
			e.exec(`UPDATE "Select Schema"."My ""Quoted"" Table.v2" SET "a'b" = 'b''a', "Order" = "Order" + 50 WHERE "Order" IN (2, 3)`)
			e.exec(`DELETE FROM "Select Schema"."My ""Quoted"" Table.v2" WHERE "Order" = 4`)
			e.exec(`INSERT INTO "Select Schema"."Ünïcødé 表" VALUES ('ö"''', 5); UPDATE "Select Schema"."Ünïcødé 表" SET "ключ" = 'ü' WHERE "ключ" = 'ä'`)
			e.exec(`DELETE FROM "Select Schema"."Ünïcødé 表" WHERE "значение" = 2`)
			e.exec(`UPDATE "Select Schema"."full ident" SET "user" = 'moved', "from" = NULL WHERE "a'b" IN (1, 5)`)
			e.exec(`DELETE FROM "Select Schema"."full ident" WHERE "a'b" = 7`)
			e.exec(`INSERT INTO "weird.schema".t VALUES (2, 'h'); UPDATE "weird.schema".t SET "group" = NULL WHERE id = 1`)
			e.exec(`INSERT INTO "x""; DROP TABLE victim; --" VALUES (3, 'x', 'b''c'); UPDATE "x""; DROP TABLE victim; --" SET "a); DELETE FROM victim; --" = 30 WHERE "a); DELETE FROM victim; --" = 1`)
			e.exec(`DELETE FROM "x""; DROP TABLE victim; --" WHERE "a); DELETE FROM victim; --" = 2`)
			for _, id := range all {
				e.assertConvergedID(id)
			}
			if src, dst := e.sourceCount(victimTable), e.destCount(victimTable); src != 5 || dst != 5 {
				t.Fatalf("victim holds %d rows on the source and %d in the destination, want 5 and 5", src, dst)
			}
			if n := e.destCount(hostileTable); n != 2 {
				t.Fatalf("the hostile table holds %d rows in the destination, want 2", n)
			}
			e.assertVerified(all...)
			namesRoundTrip(t, e, all)
		})
	}
}

// namesRoundTrip: the name an object is shown by (the API's and CLI's
// object field) reads back, as an object name of a request, as the same
// table; a backfill initiated by those names reaches the tables.
func namesRoundTrip(t *testing.T, e *env, ids []change.TableID) {
	t.Helper()
	var back []change.TableID
	for _, id := range ids {
		name := config.FormatTable(id)
		p, err := config.ParsePattern(name)
		got, literal := p.Table()
		if err != nil || !literal || got != id {
			t.Fatalf("object %v is shown as %q, which reads back as %v (literal %v, %v)", id, name, got, literal, err)
		}
		back = append(back, got)
	}
	e.backfill(back...)
	for _, id := range ids {
		e.assertConvergedID(id)
	}
	want := []string{"Select Schema.My \"Quoted\" Table.v2", "Select Schema.full ident", "Select Schema.Ünïcødé 表",
		"victim", "weird.schema.t", "x\"; DROP TABLE victim; --"}
	if e.dest == "postgres" {
		want = []string{"Select Schema.My \"Quoted\" Table.v2", "Select Schema.full ident", "Select Schema.Ünïcødé 表",
			"public.victim", "public.x\"; DROP TABLE victim; --", "weird.schema.t"}
	}
	got := e.destTables()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("destination tables %q, want %q", got, want)
	}
}
