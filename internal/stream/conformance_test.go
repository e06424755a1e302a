package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// conformChunk is the suite's chunk size: a dozen chunks of items.
const conformChunk = 250

// itemsRows is how many rows items starts with, besides the hot row.
const itemsRows = 3000

// hotKey is the key of items' hot row: only the writer's counter updates
// touch it, so its events are one increasing sequence of v.
const hotKey = "0"

// eventSource is a source of the conformance suite: a database holding
// items, and how the writer changes it.
type eventSource struct {
	name string
	// env makes a case's env: a source database holding items (itemsRows
	// rows and the hot row, whose big value is large), streamed into dest.
	env func(t *testing.T, dest eventDest) (*env, change.TableID)
	// writer opens a connection running statements on the case's source.
	writer func(e *env, id change.TableID) (exec func(q string, args ...any) error, close func())
	sql    itemsSQL
	// unchanged is what an update event's after carries for the big value
	// the update left alone, given the value's JSON.
	unchanged func(big json.RawMessage) json.RawMessage
}

// itemsSQL are the writer's statements in a source's dialect.
type itemsSQL struct {
	bump   string // adds 1 to the hot row's v
	update string // adds 1 to v of key $1
	upsert string // inserts key $1 with v $2, or changes its note
	move   string // moves key $2 to key $1
	delete string // deletes key $1
}

// TestEventDestinations runs every event destination through the same
// conformance case, from each source: the destination already holds
// stale and extra rows (a consumer's view that missed changes); a
// backfill runs while a writer inserts, updates, deletes and moves keys
// across chunks and bumps a counter of one hot row. The reference
// consumer replaying the destination must then hold exactly the source's
// rows (live events, the backfill's "r" events and its chunk marks
// together reset it); the hot row's events must arrive in the source's
// commit order, every update of it present; and an update that left the
// hot row's large value alone must carry what docs/events.md says for it,
// never null. Adding a destination or a source is a row of its table.
func TestEventDestinations(t *testing.T) {
	my, err := mysqlserver.Start(context.Background(), mysqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after every case's stream has stopped.
	t.Cleanup(my.Stop)
	for _, src := range []eventSource{pgItems(), mariaItems(my)} {
		for _, dest := range eventDests {
			t.Run(src.name+"/"+dest.name, func(t *testing.T) {
				t.Parallel()
				runEventCase(t, src, dest)
			})
		}
	}
}

func runEventCase(t *testing.T, src eventSource, dest eventDest) {
	e, id := src.env(t, dest)
	e.cfg.Backfill.Mode = config.BackfillManual
	e.cfg.Backfill.ChunkSize = conformChunk
	e.cfg.Backfill.Verify = false
	typ, err := source.Lookup(e.cfg.Source.Type)
	if err != nil {
		t.Fatal(err)
	}
	enc := typ.Encoder(e.cfg.Name, "", true, "test")
	seeded := itemsTable(id)
	dest.seed(e, enc, seeded)
	e.start()
	exec, closeWriter := src.writer(e, id)
	defer closeWriter()
	stop := itemsWriter(t, exec, src.sql)
	defer stop() // before closeWriter, also when the test fails early
	if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByCLI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitForWithin(5*time.Minute, "items completed", func() bool {
		o := e.objectOf(id)
		if o.Status == StatusFailed {
			t.Fatalf("backfill failed: %s", o.Reason)
		}
		return o.Status == StatusCompleted
	})
	writes, bumps := stop()
	tbl := e.s.lookup(id)
	want := e.sourceEvents(enc, tbl)
	var diff string
	var hot []keyEvent
	var checked time.Time
	e.waitFor("the destination replays to the source's rows", func() bool {
		// A replay reads the whole destination: twice a second at most,
		// not on every stream event.
		if time.Since(checked) < 500*time.Millisecond {
			return false
		}
		checked = time.Now()
		hot = nil
		r, err := dest.read(e, tbl, watchKey(t, hotKey, &hot))
		if err != nil {
			t.Fatal(err)
		}
		diff = diffEvents(want, r.Rows())
		return diff == ""
	}, func() string { return diff })
	checkKeyOrder(t, hot, want[hotKey], src.unchanged)
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes during the backfill, %d of the hot row; backfill %+v", writes, bumps, recs[0])
	if recs[0].Chunks < itemsRows/conformChunk {
		t.Errorf("%d chunks for %d rows with chunk_size %d", recs[0].Chunks, itemsRows, conformChunk)
	}
	if dest.check != nil {
		dest.check(e, tbl, recs[0].Chunks)
	}
}

// bigValue is the hot row's large value: over PostgreSQL's TOAST
// threshold, uncompressed (storage EXTERNAL), so it is stored out of line.
const bigValue = "repeat('out of line ', 400)"

func pgItems() eventSource {
	return eventSource{
		name: "postgres",
		env: func(t *testing.T, dest eventDest) (*env, change.TableID) {
			e := newEnv(t, envOptions{dest: dest.dest, destKeys: dest.keys, setup: fmt.Sprintf(`
				CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL, note text, big text);
				ALTER TABLE items ALTER COLUMN big SET STORAGE EXTERNAL;
				INSERT INTO items SELECT g, g, 'note ' || g FROM generate_series(1, %d) g;
				INSERT INTO items VALUES (%s, 0, 'hot', %s);`, itemsRows, hotKey, bigValue)})
			return e, change.TableID{Schema: "public", Name: "items"}
		},
		writer: func(e *env, id change.TableID) (func(string, ...any) error, func()) {
			conn, err := pgx.Connect(e.ctx, e.srcDSN)
			if err != nil {
				e.t.Fatal(err)
			}
			exec := func(q string, args ...any) error { _, err := conn.Exec(e.ctx, q, args...); return err }
			return exec, func() { conn.Close(context.Background()) }
		},
		sql: itemsSQL{
			bump:   "UPDATE items SET v = v + 1 WHERE id = " + hotKey,
			update: "UPDATE items SET v = v + 1 WHERE id = $1",
			upsert: "INSERT INTO items (id, v, note) VALUES ($1, $2, 'new') ON CONFLICT (id) DO UPDATE SET note = 'reinserted'",
			move:   "UPDATE items SET id = $1, note = 'moved' WHERE id = $2",
			delete: "DELETE FROM items WHERE id = $1",
		},
		// pgoutput does not send an out-of-line value an update left alone.
		unchanged: func(json.RawMessage) json.RawMessage { return json.RawMessage(strconv.Quote(event.Unavailable)) },
	}
}

// mariaItems is the MariaDB source: a database of its own on my per case.
func mariaItems(my *mysqlserver.Server) eventSource {
	return eventSource{
		name: "mariadb",
		env: func(t *testing.T, dest eventDest) (*env, change.TableID) {
			db := "events_" + dest.name
			dsn, err := my.CreateDatabase(context.Background(), db)
			if err == nil {
				err = my.Exec(context.Background(), db,
					"CREATE TABLE items (id BIGINT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40), big TEXT)",
					fmt.Sprintf("INSERT INTO items (id, v, note) SELECT seq, seq, CONCAT('note ', seq) FROM seq_1_to_%d", itemsRows),
					fmt.Sprintf("INSERT INTO items VALUES (%s, 0, 'hot', %s)", hotKey, bigValue))
			}
			if err != nil {
				t.Fatal(err)
			}
			return mysqlEnvWith(t, dsn, db, envOptions{dest: dest.dest, destKeys: dest.keys}), change.TableID{Schema: db, Name: "items"}
		},
		writer: func(e *env, id change.TableID) (func(string, ...any) error, func()) {
			conn, err := my.Root(e.ctx)
			if err == nil {
				_, err = conn.Execute("USE " + mysqlserver.QuoteIdent(id.Schema))
			}
			if err != nil {
				e.t.Fatal(err)
			}
			exec := func(q string, args ...any) error { _, err := conn.Execute(q, args...); return err }
			return exec, func() { conn.Close() }
		},
		sql: itemsSQL{
			bump:   "UPDATE items SET v = v + 1 WHERE id = " + hotKey,
			update: "UPDATE items SET v = v + 1 WHERE id = ?",
			upsert: "INSERT INTO items (id, v, note) VALUES (?, ?, 'new') ON DUPLICATE KEY UPDATE note = 'reinserted'",
			move:   "UPDATE items SET id = ?, note = 'moved' WHERE id = ?",
			delete: "DELETE FROM items WHERE id = ?",
		},
		// A full row image carries every value.
		unchanged: func(big json.RawMessage) json.RawMessage { return big },
	}
}

// itemsTable is the shape of items, as the seeds are encoded.
func itemsTable(id change.TableID) *change.Table {
	return &change.Table{ID: id, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Tag: change.TagInt64}, {Name: "v", Tag: change.TagInt32},
		{Name: "note", Tag: change.TagText}, {Name: "big", Tag: change.TagText},
	}}
}

// staleItems are inserts of rows the source does not have (keys -7 and
// 9999999) and of a stale version of every tenth row, as if a consumer
// had missed changes.
func staleItems(t *change.Table) []*change.Change {
	var out []*change.Change
	add := func(id, v int, note string) {
		out = append(out, &change.Change{Kind: change.Insert, Table: t,
			Row: change.Row{change.Text(fmt.Sprint(id)), change.Text(fmt.Sprint(v)), change.Text(note), change.Null}})
	}
	add(-7, 0, "extra")
	add(9999999, 0, "extra")
	for id := 10; id <= itemsRows; id += 10 {
		add(id, -1, "stale")
	}
	return out
}

// itemsWriter changes items through exec until stopped or writerLimit
// statements are made: updates,
// inserts, deletes, key moves to far keys (across chunks) and, one
// statement in ten, a bump of the hot row's counter. stop returns the
// statements that succeeded and the bumps among them.
func itemsWriter(t *testing.T, exec func(q string, args ...any) error, q itemsSQL) (stop func() (writes, bumps int)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var writes, bumps int
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(7, 1))
		// About 300 statements a second: enough to land in every chunk's
		// window, and eight cases in parallel do not swamp two cores.
		pace := time.NewTicker(3 * time.Millisecond)
		defer pace.Stop()
		for i := 0; i < writerLimit; i++ {
			select {
			case <-done:
				return
			case <-pace.C:
			}
			id := 1 + r.IntN(itemsRows)
			var err error
			switch op := r.IntN(10); {
			case op == 0:
				if err = exec(q.bump); err != nil {
					select {
					case <-done: // the test is ending
					default:
						t.Errorf("bump the hot row: %v", err)
					}
					return
				}
				bumps++
			case op < 4:
				err = exec(q.update, id)
			case op < 6:
				err = exec(q.upsert, itemsRows+r.IntN(itemsRows), i)
			case op < 8:
				err = exec(q.move, 3*itemsRows+i, id)
			default:
				err = exec(q.delete, id)
			}
			if err == nil {
				writes++
			}
		}
	}()
	var once sync.Once
	return func() (int, int) {
		once.Do(func() { close(done) })
		wg.Wait()
		return writes, bumps
	}
}

// sourceEvents reads items from the source in one snapshot and encodes
// its rows as backfill events' after objects, keyed by id.
func (e *env) sourceEvents(enc *event.Encoder, t *change.Table) map[string]map[string]json.RawMessage {
	e.t.Helper()
	src, err := source.Open(e.ctx, e.cfg.Source, source.Options{}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer src.Close()
	chunk, err := src.ReadChunk(e.ctx, t, source.ReadOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]map[string]json.RawMessage{}
	for _, row := range chunk.Rows {
		m, err := enc.Row(t, row, event.Origin{})
		if err != nil {
			e.t.Fatal(err)
		}
		var v struct{ After map[string]json.RawMessage }
		if err := json.Unmarshal(m.Value, &v); err != nil {
			e.t.Fatal(err)
		}
		out[string(v.After["id"])] = v.After
	}
	return out
}

func diffEvents(want map[string]map[string]json.RawMessage, got []map[string]json.RawMessage) string {
	var problems []string
	seen := map[string]bool{}
	for _, g := range got {
		id := string(g["id"])
		seen[id] = true
		w, ok := want[id]
		switch {
		case !ok:
			problems = append(problems, "extra row "+id)
		default:
			for col, v := range w {
				if string(g[col]) != string(v) {
					problems = append(problems, fmt.Sprintf("row %s column %s: %.80s, want %.80s", id, col, g[col], v))
				}
			}
		}
	}
	for id := range want {
		if !seen[id] {
			problems = append(problems, "missing row "+id)
		}
	}
	sort.Strings(problems)
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("… %d more", len(problems)-10))
	}
	return strings.Join(problems, "\n")
}

// keyEvent is one event of a key, as a reader applied it.
type keyEvent struct {
	op    string
	after map[string]json.RawMessage
}

// watchKey appends the events of the rows whose id is key to *events.
func watchKey(t *testing.T, key string, events *[]keyEvent) event.Watch {
	return func(value []byte) {
		if value == nil {
			return // a tombstone
		}
		var ev struct {
			Op            string
			Before, After map[string]json.RawMessage
		}
		if err := json.Unmarshal(value, &ev); err != nil {
			t.Fatalf("event %.200s: %v", value, err)
		}
		row := ev.After
		if row == nil {
			row = ev.Before
		}
		if string(row["id"]) == key {
			*events = append(*events, keyEvent{ev.Op, ev.After})
		}
	}
}

// checkKeyOrder checks the hot row's events against its source row: v
// never goes down (the events are in commit order), every bump from 1 to
// the source's v has its update event, the last event holds the source's
// v, and each event carries the big value: in full, or as unchanged says
// an update that left it alone carries it.
func checkKeyOrder(t *testing.T, events []keyEvent, want map[string]json.RawMessage, unchanged func(json.RawMessage) json.RawMessage) {
	t.Helper()
	final, err := strconv.Atoi(string(want["v"]))
	if err != nil || final < 1 {
		t.Fatalf("the hot row's v is %s in the source: the writer never bumped it", want["v"])
	}
	updated := map[int]bool{}
	prev := -1
	for i, ev := range events {
		if ev.op == "d" {
			t.Fatalf("event %d of the hot row deletes it", i)
		}
		v, err := strconv.Atoi(string(ev.after["v"]))
		if err != nil {
			t.Fatalf("event %d of the hot row: v %s", i, ev.after["v"])
		}
		if v < prev {
			t.Errorf("event %d of the hot row (op %s) has v %d after v %d: not in commit order", i, ev.op, v, prev)
		}
		prev = v
		big := want["big"]
		if ev.op == "u" {
			updated[v] = true
			big = unchanged(big)
		}
		if string(ev.after["big"]) != string(big) {
			t.Errorf("event %d of the hot row (op %s): big is %.80s, want %.80s", i, ev.op, ev.after["big"], big)
		}
	}
	for v := 1; v <= final; v++ {
		if !updated[v] {
			t.Errorf("no update event of the hot row sets v to %d (of %d bumps)", v, final)
		}
	}
	if prev != final {
		t.Errorf("the hot row's last event has v %d, the source %d", prev, final)
	}
	t.Logf("%d events of the hot row, %d bumps", len(events), final)
}
