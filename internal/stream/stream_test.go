package stream

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

func TestStreamAppliesChangesInOrder(t *testing.T) {
	for _, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{dest: dest, yaml: "backfill: {mode: manual}", setup: `
				CREATE TABLE items (id int PRIMARY KEY, name text, qty int, big text);
				CREATE TABLE "Odd Name" ("Key" text PRIMARY KEY, "select" int);`})
			e.start()
			e.exec(`INSERT INTO items SELECT g, 'item ' || g, g, NULL FROM generate_series(1, 200) g`)
			e.exec(`UPDATE items SET qty = qty * 10 WHERE id % 7 = 0`)
			e.exec(`UPDATE items SET id = id + 1000 WHERE id BETWEEN 50 AND 60`)
			e.exec(`DELETE FROM items WHERE id % 5 = 0`)
			e.exec(`INSERT INTO "Odd Name" VALUES ('a''b', 1), ('ü x', 2)`)
			e.assertConverged("items")
			e.assertConverged("Odd Name")
			e.exec(`TRUNCATE items`)
			e.exec(`INSERT INTO items VALUES (1, 'after truncate', 1, repeat('x', 10))`)
			e.assertConverged("items")
			o := e.object("items")
			if o.Status != StatusNone || o.Reason != ReasonManual {
				t.Fatalf("object status %q reason %q, want - with %q", o.Status, o.Reason, ReasonManual)
			}
		})
	}
}

func TestObjectStatusRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{yaml: "backfill: {mode: manual, max_concurrent: 1, rows_per_second: 2000, chunk_size: 100}", setup: `
		CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 1000);
		CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b SELECT generate_series(1, 1000);
		CREATE TABLE nokey (v int);`})
	e.start()
	ids := func(names ...string) []change.TableID {
		var out []change.TableID
		for _, n := range names {
			out = append(out, change.TableID{Schema: "public", Name: n})
		}
		return out
	}
	if o := e.object("nokey"); o.Status != StatusFailed || !strings.Contains(o.Reason, "primary key") {
		t.Fatalf("table without key: status %q reason %q, want failed with how to fix", o.Status, o.Reason)
	}
	refused := func(err error, want string) {
		t.Helper()
		var r *RefusedError
		if !errors.As(err, &r) || !strings.Contains(r.Msg, want) {
			t.Fatalf("got %v, want a refusal mentioning %q", err, want)
		}
	}
	refused(e.s.StopBackfills(e.ctx, ids("a")), "has none running")
	events, cancel := e.s.Subscribe()
	defer cancel()
	if _, err := e.s.Initiate(e.ctx, ids("a", "b"), store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	// One at a time: b waits as Pending while a is Active.
	e.waitFor("a active", func() bool { return e.object("a").Status == StatusActive })
	if st := e.object("b").Status; st != StatusPending {
		t.Fatalf("b is %q while a is active with max_concurrent 1, want pending", st)
	}
	_, err := e.s.Initiate(e.ctx, ids("a"), store.StartedByCLI, nil)
	refused(err, "is active")
	_, err = e.s.Initiate(e.ctx, ids("b"), store.StartedByCLI, nil)
	refused(err, "is pending")
	if err := e.s.StopBackfills(e.ctx, ids("b")); err != nil {
		t.Fatal(err)
	}
	if st := e.object("b").Status; st != StatusStopped {
		t.Fatalf("b after stop is %q, want stopped", st)
	}
	refused(e.s.StopBackfills(e.ctx, ids("b")), "already stopped")
	e.waitLoaded("a")
	refused(e.s.StopBackfills(e.ctx, ids("a")), "already completed")
	// The pushed history of a's first backfill: Pending → Active → Completed,
	// then loaded.
	var history []string
	for len(events) > 0 {
		ev := <-events
		if ev.Backfill == nil || ev.Backfill.Table != "a" {
			continue
		}
		st := ev.Backfill.Status
		if ev.Backfill.LoadedAt != nil {
			st += "+loaded"
		}
		if len(history) == 0 || history[len(history)-1] != st {
			history = append(history, st)
		}
	}
	if got := strings.Join(history, " → "); got != "pending → active → completed → completed+loaded" && got != "pending → active → active+loaded → completed+loaded" {
		t.Errorf("backfill history of a: %s", got)
	}
	// A table without a usable key: initiating it fails it again, with the reason.
	if _, err := e.s.Initiate(e.ctx, ids("nokey"), store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitFor("nokey failed", func() bool {
		o := e.object("nokey")
		return o.Status == StatusFailed && o.BackfillID != 0 && strings.Contains(o.Reason, "primary key")
	})
	// Initiating a Completed or Stopped object copies all rows again.
	if _, err := e.s.Initiate(e.ctx, ids("a", "b"), store.StartedByAPI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("a")
	e.waitLoaded("b")
	e.assertConverged("b")
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].RowsRead != 1000 || recs[0].StartedBy != store.StartedByAPI || recs[0].LoadedAt == nil {
		t.Fatalf("backfill records of a: %+v", recs)
	}
}

// TestFutureTables: a table created after the stream started is streamed
// from its next start (or while running, see schema_tables_test.go) when
// include_future_tables allows; in automatic mode the rows it held before
// it joined are copied by a backfill started by discovery, in manual mode
// it waits for one with ReasonFuture.
func TestFutureTables(t *testing.T) {
	for _, tc := range []struct {
		include bool
		mode    string
	}{{true, "automatic"}, {true, "manual"}, {false, "automatic"}} {
		t.Run(fmt.Sprint(tc.include, tc.mode), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{yaml: fmt.Sprintf("include_future_tables: %v\nbackfill: {mode: %s}", tc.include, tc.mode), setup: `
				CREATE TABLE first (id int PRIMARY KEY); INSERT INTO first VALUES (1);`})
			e.start()
			e.exec(`CREATE TABLE later (id int PRIMARY KEY); INSERT INTO later VALUES (1)`)
			e.stop()
			e.start()
			o, err := e.st.GetObject(e.ctx, e.cfg.Name, "public", "later")
			if !tc.include {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("include_future_tables false: later is an object (%+v, %v)", o, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e.exec(`INSERT INTO later VALUES (2)`)
			if tc.mode == "automatic" {
				e.waitLoaded("later")
				e.assertConverged("later")
				recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: "later"})
				if err != nil || len(recs) != 1 || recs[0].StartedBy != StartedByDiscovery {
					t.Fatalf("backfills of later: %+v %v, want one started by discovery", recs, err)
				}
				return
			}
			if o.Status != StatusNone || o.Reason != ReasonFuture {
				t.Fatalf("future table in manual mode: %+v, want status - with reason %q", o, ReasonFuture)
			}
			// Rows written after it joined are streamed; the older row needs
			// a backfill, which manual mode leaves to a person.
			later := e.s.lookup(change.TableID{Schema: "public", Name: "later"})
			dest := e.openDest()
			e.waitFor("row 2 streamed", func() bool {
				rows, err := dest.ReadRange(e.ctx, later, nil, nil)
				return err == nil && len(rows) == 1 && rows[0][0].Text == "2"
			})
		})
	}
}

// TestKeysMustBeReplicaIdentity: a configured key is accepted when the log
// identifies rows by it (REPLICA IDENTITY FULL), and refused otherwise, with
// what to do, since deletes would otherwise be lost.
func TestKeysMustBeReplicaIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", yaml: `
keys:
  public.full_ident: [code]
  public.default_ident: [code]
backfill: {mode: automatic}`, setup: `
		CREATE TABLE full_ident (code text NOT NULL, v int); ALTER TABLE full_ident REPLICA IDENTITY FULL;
		INSERT INTO full_ident VALUES ('a', 1), ('b', 2);
		CREATE TABLE default_ident (id int PRIMARY KEY, code text NOT NULL);`})
	e.start()
	if o := e.object("default_ident"); o.Status != StatusFailed || !strings.Contains(o.Reason, "REPLICA IDENTITY FULL") {
		t.Fatalf("key outside the replica identity: status %q reason %q", o.Status, o.Reason)
	}
	e.waitLoaded("full_ident")
	e.exec(`DELETE FROM full_ident WHERE code = 'a'`)
	e.exec(`UPDATE full_ident SET v = 20 WHERE code = 'b'`)
	e.assertConverged("full_ident")
}

// TestCountersOfATransactionAcrossTables: one source transaction that
// changes three tables is one destination commit, whose counters are
// recorded for each table in one store statement; each object's events
// are its own changes.
func TestCountersOfATransactionAcrossTables(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{yaml: "backfill: {mode: manual}", setup: `
		CREATE TABLE a (id int PRIMARY KEY, v text);
		CREATE TABLE b (id int PRIMARY KEY, v text);
		CREATE TABLE "c d" (id int PRIMARY KEY, v text);`})
	var writes atomic.Int64
	e.st.Observe(func(op string, _ time.Duration) {
		if op == "insert counters" || op == "tx add_counters" {
			writes.Add(1)
		}
	})
	e.start()
	e.exec(`BEGIN;
		INSERT INTO a SELECT g, 'a' FROM generate_series(1, 5) g;
		INSERT INTO b SELECT g, 'b' FROM generate_series(1, 3) g;
		INSERT INTO "c d" SELECT g, 'c' FROM generate_series(1, 2) g;
		COMMIT`)
	want := map[string]int64{"a": 5, "b": 3, "c d": 2}
	got := map[string]store.Counters{}
	e.waitFor("each table's counters", func() bool {
		for table, events := range want {
			c, err := e.st.SumCounters(e.ctx, e.cfg.Name, "public", table, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			got[table] = c
			if c.EventsProcessed != events || c.EventsLoaded != events || c.BytesLoaded <= 0 {
				return false
			}
		}
		// The store tells of a write once its statement returned: the
		// counters can be read a moment before.
		return writes.Load() > 0
	}, func() string { return fmt.Sprintf("%+v, want events %v", got, want) })
	if n := writes.Load(); n != 1 {
		t.Errorf("the counters of one commit took %d store writes, want 1", n)
	}
	e.assertConverged("c d")
}

// TestStartRecordsObjectsTogether: a start records the objects of the
// tables it found in one store write, not one a table.
func TestStartRecordsObjectsTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{yaml: "backfill: {mode: manual}", setup: `
		CREATE TABLE a (id int PRIMARY KEY);
		CREATE TABLE b (id int PRIMARY KEY);
		CREATE TABLE c (id int PRIMARY KEY);`})
	var mu sync.Mutex
	writes := map[string]int{}
	e.st.Observe(func(op string, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		writes[op]++
	})
	e.start()
	for _, table := range []string{"a", "b", "c"} {
		if o := e.object(table); o.Status != StatusNone {
			t.Fatalf("object %s after the start: %+v", table, o)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if writes["tx record_objects"] != 1 || writes["insert objects"] != 0 {
		t.Fatalf("the start's objects took %d batched writes and %d single ones, want one batched", writes["tx record_objects"], writes["insert objects"])
	}
}
