package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/store"
)

// Schema changes on a MariaDB source while a backfill of the table is
// active: a chunk is held registered (its window open, not read yet) or
// read (not merged yet) while the ALTER and rows after it are written and a
// writer runs (docs/schema-changes.md, MySQL).

// chunkGate holds the nth chunk of a table at a stage until released.
type chunkGate struct {
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

// holdChunk holds the nth chunk (from 1) of table id at stage at.
func (e *env) holdChunk(id change.TableID, at chunkStage, nth int64) *chunkGate {
	g, h := e.chunkGateHook(id, at, nth)
	e.s.bf.hook.Store(&h)
	return g
}

// holdChunkFromStart is holdChunk for the stream start starts: the hook is
// set before the stream runs, so a first start's load is held too.
func (e *env) holdChunkFromStart(id change.TableID, at chunkStage, nth int64) *chunkGate {
	g, h := e.chunkGateHook(id, at, nth)
	e.hook = &h
	return g
}

func (e *env) chunkGateHook(id change.TableID, at chunkStage, nth int64) (*chunkGate, chunkHook) {
	g := &chunkGate{held: make(chan struct{}), release: make(chan struct{})}
	var seen atomic.Int64
	h := chunkHook(func(ctx context.Context, tid change.TableID, stage chunkStage) {
		if tid != id || stage != at || seen.Add(1) != nth {
			return
		}
		close(g.held)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	})
	e.t.Cleanup(g.open)
	return g, h
}

func (g *chunkGate) open() { g.once.Do(func() { close(g.release) }) }

// wait waits until the chunk is held.
func (g *chunkGate) wait(e *env) {
	e.t.Helper()
	select {
	case <-g.held:
	case <-time.After(waitTimeout):
		e.t.Fatal("timed out waiting for the chunk to be held")
	}
}

// mysqlWriter runs the statements next gives on a connection of its own,
// one every 5ms, until the returned stop, which waits for it and fails the test on an
// error of one.
func mysqlWriter(t *testing.T, srv *mysqlserver.Server, db string, next func(r *rand.Rand, i int) string) (stop func()) {
	t.Helper()
	c, err := srv.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("USE " + mysqlserver.QuoteIdent(db)); err != nil {
		t.Fatal(err)
	}
	done, quit := make(chan error, 1), make(chan struct{})
	go func() {
		defer c.Close()
		r := rand.New(rand.NewPCG(uint64(len(db)), 12))
		pace := time.NewTicker(5 * time.Millisecond) // a steady load, not a flood
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-quit:
				done <- nil
				return
			case <-pace.C:
			}
			q := next(r, i)
			if _, err := c.Execute(q); err != nil {
				done <- fmt.Errorf("%s: %w", q, err)
				return
			}
		}
	}()
	var once sync.Once
	stop = func() {
		t.Helper()
		once.Do(func() {
			close(quit)
			if err := <-done; err != nil {
				t.Error("writer:", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// mysqlDDLRows is the table every test here changes, with 1,000 rows
// (chunks of 50: the 5th is in the middle).
var mysqlDDLRows = []string{
	"CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR(10), old VARCHAR(20), big BIGINT, keep INT)",
	"INSERT INTO t SELECT seq, seq, CONCAT('s', seq), CONCAT('o', seq), seq * 1000, seq FROM seq_1_to_1000",
	"CREATE TABLE o (id INT PRIMARY KEY, n INT)",
}

// mysqlDDLBackfill starts a manual stream over mysqlDDLRows with a writer
// on o (and on t's n, unless tableGone), holds t's backfill at its 5th
// chunk at stage, and returns once it is held, with the writer's stop.
func mysqlDDLBackfill(t *testing.T, e *env, srv *mysqlserver.Server, db string, at chunkStage, tableGone bool) (*chunkGate, func()) {
	t.Helper()
	tID := change.TableID{Schema: db, Name: "t"}
	e.cfg.Backfill.Mode, e.cfg.Backfill.ChunkSize = "manual", 50
	e.start()
	gate := e.holdChunk(tID, at, 5)
	stop := mysqlWriter(t, srv, db, func(r *rand.Rand, i int) string {
		if i%2 == 0 || tableGone {
			return fmt.Sprintf("INSERT INTO o VALUES (%d, %d) ON DUPLICATE KEY UPDATE n = n + 1", r.IntN(200), i)
		}
		return fmt.Sprintf("UPDATE t SET big = big + 1 WHERE id = %d", 1+r.IntN(1000))
	})
	if _, err := e.s.Initiate(e.ctx, []change.TableID{tID}, store.StartedByAPI, nil); err != nil {
		t.Fatal(err)
	}
	gate.wait(e)
	if o := e.objectOf(tID); o.Status != StatusActive {
		t.Fatalf("backfill not active when the schema changes: %+v", o)
	}
	return gate, stop
}

var chunkStages = map[chunkStage]string{chunkRegistered: "registered", chunkRead: "read"}

// TestMySQLRenameAndWidenDuringBackfill: a column renamed and columns
// widened (INT to BIGINT, VARCHAR(10) to VARCHAR(40)) while a chunk of the
// table's backfill is in flight and a writer runs: the backfill completes
// and the destination, renamed and widened, equals the source value by
// value, the rows copied before the change included.
func TestMySQLRenameAndWidenDuringBackfill(t *testing.T) {
	srv, newDB := mysqlSchemaServer(t)
	i := 0
	for _, dest := range schemaDests {
		for _, at := range []chunkStage{chunkRegistered, chunkRead} {
			i++
			t.Run(dest+"/"+chunkStages[at], func(t *testing.T) {
				e, exec, db := newDB(t, i, dest, mysqlDDLRows...)
				tID := change.TableID{Schema: db, Name: "t"}
				gate, stop := mysqlDDLBackfill(t, e, srv, db, at, false)
				exec("ALTER TABLE t RENAME COLUMN old TO new",
					"UPDATE t SET new = 'renamed' WHERE id IN (1, 230, 999)",
					"ALTER TABLE t MODIFY n BIGINT, MODIFY s VARCHAR(40)",
					"UPDATE t SET n = 9223372036854775807, s = 'much longer than ten characters' WHERE id IN (2, 240, 998)",
					"INSERT INTO t (id, n, s, new) VALUES (5000, -9223372036854775808, 'forty characters, forty characters, 40!', 'x')",
					"DELETE FROM t WHERE id IN (3, 235, 997)")
				gate.open()
				e.waitLoadedID(tID)
				stop()
				e.waitColumnsOf(tID, "id", "n", "s", "new", "big", "keep")
				e.assertConvergedMySQL(tID)
				e.assertConvergedMySQL(change.TableID{Schema: db, Name: "o"})
				e.wantDestColumns(tID, []string{"n bigint", "s character varying(40)", "new character varying(20)"}, "old")
				recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "t"})
				if err != nil || len(recs) != 1 || recs[0].Status != StatusCompleted {
					t.Fatalf("backfills of t: %+v %v, want the one, completed", recs, err)
				}
			})
		}
	}
}

// TestMySQLFailingChangesDuringBackfill: a dropped column, a narrowing, a
// change to another type, a dropped table and a renamed table while a
// chunk of the table's backfill is in flight and a writer runs on another
// table: the table's object alone goes failed with what to do, its
// backfill ends, and the other table streams on. The dropped column's
// object is then recovered as the reason says; the renamed table is a new
// one, backfilled under its new name.
func TestMySQLFailingChangesDuringBackfill(t *testing.T) {
	srv, newDB := mysqlSchemaServer(t)
	cases := []struct {
		name      string
		ddl       []string
		reason    []string // "" reason parts: the stream's initiate hint is added
		tableGone bool
	}{
		{name: "drop column", ddl: []string{"ALTER TABLE t DROP COLUMN old", "UPDATE t SET n = 0 WHERE id IN (1, 230)"},
			reason: []string{`column "old" was dropped on the source`}},
		{name: "narrowing", ddl: []string{"ALTER TABLE t MODIFY big INT", "UPDATE t SET big = 1 WHERE id IN (1, 230)"},
			reason: []string{`column "big" changed type from bigint to integer`}},
		{name: "other type", ddl: []string{"ALTER TABLE t MODIFY keep VARCHAR(20)", "UPDATE t SET keep = 'text' WHERE id = 999"},
			reason: []string{`column "keep" changed type from integer to character varying(20)`}},
		{name: "drop table", ddl: []string{"DROP TABLE t"}, reason: []string{ReasonDropped}, tableGone: true},
		{name: "rename table", ddl: []string{"RENAME TABLE t TO t2", "UPDATE t2 SET n = 0 WHERE id IN (1, 230)"},
			reason: []string{ReasonDropped}, tableGone: true},
	}
	i := 10
	for _, dest := range schemaDests {
		for k, c := range cases {
			i++
			at := []chunkStage{chunkRegistered, chunkRead}[k%2]
			t.Run(dest+"/"+c.name, func(t *testing.T) {
				e, exec, db := newDB(t, i, dest, mysqlDDLRows...)
				e.cfg.DiscoveryInterval, e.cfg.IncludeFutureTables = 100*time.Millisecond, true
				tID, oID := change.TableID{Schema: db, Name: "t"}, change.TableID{Schema: db, Name: "o"}
				gate, stop := mysqlDDLBackfill(t, e, srv, db, at, c.tableGone)
				exec(c.ddl...)
				gate.open()
				reason := c.reason
				if !c.tableGone {
					reason = append(reason, "tidemark backfill initiate "+e.cfg.Name+" "+tID.String())
				}
				e.waitFailed(tID, reason...)
				recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "t"})
				if err != nil || len(recs) != 1 || recs[0].Status != StatusFailed {
					t.Fatalf("backfills of t: %+v %v, want the one, failed", recs, err)
				}
				stop()
				e.assertConvergedMySQL(oID)
				if st := e.s.State(); st.State != store.StateRunning {
					t.Fatalf("stream state %+v, want running", st)
				}
				switch c.name {
				case "drop column":
					e.execInDest(`ALTER TABLE ` + e.destTable(tID) + ` DROP COLUMN old`)
					e.initiateLoaded(tID)
					exec("UPDATE t SET keep = 0 WHERE id = 1")
					e.assertConvergedMySQL(tID)
				case "rename table":
					t2 := change.TableID{Schema: db, Name: "t2"}
					// Known to the stream, and recorded: the record follows the lookup.
					e.waitFor("t2 found", func() bool {
						_, err := e.st.GetObject(e.ctx, e.cfg.Name, db, "t2")
						return e.s.lookup(t2) != nil && err == nil
					})
					e.initiateLoaded(t2)
					exec("UPDATE t2 SET keep = -1 WHERE id = 2", "DELETE FROM t2 WHERE id = 3")
					e.assertConvergedMySQL(t2)
				}
			})
		}
	}
}

// initiateLoaded initiates a backfill of id and waits until it is loaded.
func (e *env) initiateLoaded(id change.TableID) {
	e.t.Helper()
	if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByAPI, nil); err != nil {
		e.t.Fatal(err)
	}
	e.waitLoadedID(id)
}

// destTable is a MySQL source table's name in the destination, quoted.
func (e *env) destTable(id change.TableID) string {
	if e.dest == "sqlite" {
		return `"` + strings.ReplaceAll(id.Schema+"."+id.Name, `"`, `""`) + `"`
	}
	return `"` + id.Schema + `"."` + id.Name + `"`
}

// TestMySQLFailingChangesStreaming: while the stream only streams, a
// narrowing, a change to another type, a dropped table and a renamed table
// fail their objects alone, with what to do, while another table streams
// on; the renamed table is found under its new name and copied whole; a
// table created under the stream is found and copied.
func TestMySQLFailingChangesStreaming(t *testing.T) {
	_, newDB := mysqlSchemaServer(t)
	for i, dest := range schemaDests {
		t.Run(dest, func(t *testing.T) {
			e, exec, db := newDB(t, 30+i, dest,
				"CREATE TABLE nr (id INT PRIMARY KEY, big BIGINT, s VARCHAR(10))",
				"INSERT INTO nr SELECT seq, seq, 's' FROM seq_1_to_20",
				"CREATE TABLE ty (id INT PRIMARY KEY, k INT)",
				"INSERT INTO ty SELECT seq, seq FROM seq_1_to_20",
				"CREATE TABLE gone (id INT PRIMARY KEY)", "INSERT INTO gone VALUES (1)",
				"CREATE TABLE old_t (id INT PRIMARY KEY, v VARCHAR(10))",
				"INSERT INTO old_t SELECT seq, 'v' FROM seq_1_to_20",
				"CREATE TABLE o (id INT PRIMARY KEY)")
			e.cfg.DiscoveryInterval, e.cfg.IncludeFutureTables = 100*time.Millisecond, true
			id := func(name string) change.TableID { return change.TableID{Schema: db, Name: name} }
			e.start()
			for _, n := range []string{"nr", "ty", "gone", "old_t", "o"} {
				e.waitLoadedID(id(n))
			}
			hint := "tidemark backfill initiate " + e.cfg.Name + " "
			exec("ALTER TABLE nr MODIFY big INT", "INSERT INTO nr VALUES (21, 21, 's')")
			e.waitFailed(id("nr"), `column "big" changed type from bigint to integer`, hint+id("nr").String())
			exec("ALTER TABLE ty MODIFY k VARCHAR(20)", "INSERT INTO ty VALUES (21, 'text')")
			e.waitFailed(id("ty"), `column "k" changed type from integer to character varying(20)`, hint+id("ty").String())
			exec("DROP TABLE gone")
			e.waitFailed(id("gone"), ReasonDropped)
			exec("RENAME TABLE old_t TO new_t", "INSERT INTO new_t VALUES (21, 'renamed')")
			e.waitFailed(id("old_t"), ReasonDropped)
			exec("CREATE TABLE fresh (id INT PRIMARY KEY, v VARCHAR(10))",
				"INSERT INTO fresh SELECT seq, CONCAT('v', seq) FROM seq_1_to_50")
			for _, n := range []string{"new_t", "fresh"} {
				// Known to the stream, and recorded: the record follows the lookup.
				e.waitFor(n+" found", func() bool {
					_, err := e.st.GetObject(e.ctx, e.cfg.Name, db, n)
					return e.s.lookup(id(n)) != nil && err == nil
				})
				e.waitLoadedID(id(n))
			}
			exec("UPDATE new_t SET v = 'later' WHERE id = 1", "DELETE FROM new_t WHERE id = 2",
				"UPDATE fresh SET v = 'later' WHERE id = 7", "INSERT INTO o VALUES (1), (2)")
			for _, n := range []string{"new_t", "fresh", "o"} {
				e.assertConvergedMySQL(id(n))
			}
			if st := e.s.State(); st.State != store.StateRunning {
				t.Fatalf("stream state %+v, want running", st)
			}
		})
	}
}
