package stream

import (
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// collideSetup: source tables whose names SQLite cannot tell apart (it
// ignores ASCII case in names, and names a table of another schema
// "schema.table" in one identifier), a table with two columns differing in
// case only, and tables named like tidemark's own destination tables.
const collideSetup = `
	CREATE TABLE "Orders" (id int PRIMARY KEY, v text); INSERT INTO "Orders" VALUES (1, 'upper');
	CREATE TABLE orders (id int PRIMARY KEY, v text); INSERT INTO orders VALUES (1, 'lower'), (2, 'lower');
	CREATE TABLE cols ("A" int PRIMARY KEY, a int); INSERT INTO cols VALUES (1, 2);
	CREATE SCHEMA a; CREATE TABLE a.b (id int PRIMARY KEY); INSERT INTO a.b VALUES (1);
	CREATE TABLE "a.b" (id int PRIMARY KEY, w int); INSERT INTO "a.b" VALUES (7, 7);
	CREATE TABLE "_tidemark_checkpoint" (stream text PRIMARY KEY); INSERT INTO "_tidemark_checkpoint" VALUES ('x');
	CREATE SCHEMA _tidemark; CREATE TABLE _tidemark.checkpoint (stream text COLLATE "C" PRIMARY KEY);
	CREATE TABLE shadowed (id int PRIMARY KEY); INSERT INTO shadowed VALUES (1);`

// TestDestinationNameCollisions: a table whose destination table would be
// another table's (or tidemark's own), or whose columns would share one
// name there, is refused with the reason, failed, and not streamed; the
// others stream, each into its own table. PostgreSQL holds every name apart;
// its schema _tidemark is tidemark's. In either, a view of a table's name
// is no table to write into.
func TestDestinationNameCollisions(t *testing.T) {
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, setup: collideSetup})
			e.setPatterns(`include: ["*.*"]`)
			view, shadowed := `CREATE VIEW shadowed AS SELECT 1 AS id`, "SQLite already holds a view named \"shadowed\", not a table"
			if dest == "postgres" {
				view, shadowed = `CREATE VIEW public.shadowed AS SELECT 1 AS id`, "public.shadowed in the destination is a view, not a table"
			}
			e.execInDest(view)
			e.start()
			ab := change.TableID{Schema: "a", Name: "b"}
			own := change.TableID{Schema: "_tidemark", Name: "checkpoint"}
			streamed := []change.TableID{pubTable("Orders"), ab}
			if dest == "sqlite" {
				e.waitFailed(pubTable("orders"), "SQLite", "public.Orders", "exclude one")
				e.waitFailed(pubTable("cols"), `"A" and "a"`, "rename one")
				e.waitFailed(pubTable("a.b"), "also that of a.b")
				e.waitFailed(pubTable("_tidemark_checkpoint"), "reserved")
				streamed = append(streamed, own) // "_tidemark.checkpoint" is no name of tidemark's
			} else {
				streamed = append(streamed, pubTable("orders"), pubTable("cols"), pubTable("a.b"), pubTable("_tidemark_checkpoint"))
				e.waitFailed(own, "tidemark's own")
			}
			e.waitFailed(pubTable("shadowed"), shadowed, "exclude the table")
			for _, id := range streamed {
				e.waitLoadedID(id)
			}
			e.exec(`INSERT INTO "Orders" VALUES (2, 'upper'); INSERT INTO orders VALUES (3, 'lower');
				UPDATE "a.b" SET w = 8; INSERT INTO a.b VALUES (2); INSERT INTO "_tidemark_checkpoint" VALUES ('y')`)
			for _, id := range streamed {
				e.assertConvergedID(id)
			}
			if dest == "sqlite" {
				// The owner keeps its table across starts, whatever the order.
				e.stop()
				e.exec(`DROP TABLE "Orders"`)
				e.start()
				e.waitFailed(pubTable("orders"), `already holds another source table under "Orders"`)
			}
		})
	}
}
