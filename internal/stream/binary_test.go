package stream

import (
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/store"
)

// TestBinaryChunkWidenedInFlight: columns widened on the source (integer
// to bigint, real to double precision) while a chunk read in binary waits
// to be merged. Its values are in the old types' binary forms, which the
// widened destination columns do not read: the chunk is read again, and
// the destination equals the source. (Every chunk is read in binary: the
// stream's start made the destination table, so its types are known.)
func TestBinaryChunkWidenedInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", setup: `
		CREATE TABLE w (id int PRIMARY KEY, n int, r real, s varchar(10), at timestamptz);
		INSERT INTO w SELECT g, g * 1000, g / 10.0, 's' || g, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour'
			FROM generate_series(1, 400) g;`})
	gate := e.initiateHeld("w", 5)
	e.exec(`ALTER TABLE w ALTER COLUMN n TYPE bigint, ALTER COLUMN r TYPE double precision`)
	e.exec(`UPDATE w SET n = 9223372036854775807, r = 0.1 WHERE id IN (3, 240, 398)`)
	// The stream widens the destination with the update; only then may
	// the held chunk be merged, into the new shape.
	e.waitFor("the destination's n widened", func() bool { return slices.Contains(e.schemaDestColumns("w"), "n bigint") })
	gate.open()
	e.assertReadAgain("w")
	e.schemaDestTypes("w", map[string]string{"n": "bigint", "r": "double precision"})
}

// initiateHeld starts the stream (manual mode, chunks of 50 rows), backfills
// the table and returns once its nth chunk is read and held.
func (e *env) initiateHeld(table string, nth int64) *chunkGate {
	e.t.Helper()
	e.cfg.Backfill.Mode, e.cfg.Backfill.ChunkSize = "manual", 50
	e.start()
	id := change.TableID{Schema: "public", Name: table}
	gate := e.holdChunk(id, chunkRead, nth)
	if _, err := e.s.Initiate(e.ctx, []change.TableID{id}, store.StartedByAPI, nil); err != nil {
		e.t.Fatal(err)
	}
	gate.wait(e)
	return gate
}

// assertReadAgain waits for the table's backfill and checks that the
// destination equals the source and that its one run completed after
// reading a chunk again.
func (e *env) assertReadAgain(table string) {
	e.t.Helper()
	e.waitLoaded(table)
	e.assertConverged(table)
	recs, err := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name, Table: table})
	if err != nil || len(recs) != 1 || recs[0].Status != StatusCompleted || recs[0].Retries < 1 {
		e.t.Fatalf("backfills of %s: %+v %v; want one, completed, its held chunk read again", table, recs, err)
	}
}

// TestTextChunkWidenedInFlight: real widened to double precision on the
// source while the table's first chunk, read in text, waits to be merged.
// Its values are the real's text (0.1), which the widened column would read
// as another value than the source's ALTER made (0.10000000149011612): the
// chunk is read again, and the destination equals the source. (The interval
// column, which does not travel in binary, keeps the table's chunks in
// text.)
func TestTextChunkWidenedInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", setup: `
		CREATE TABLE wt (id int PRIMARY KEY, r real, n int, iv interval);
		INSERT INTO wt SELECT g, g / 10.0, g FROM generate_series(1, 200) g;`})
	gate := e.initiateHeld("wt", 1)
	e.exec(`ALTER TABLE wt ALTER COLUMN r TYPE double precision`)
	e.exec(`UPDATE wt SET n = -n WHERE id IN (7, 150)`)
	e.waitFor("the destination's r widened", func() bool { return slices.Contains(e.schemaDestColumns("wt"), "r double precision") })
	gate.open()
	e.assertReadAgain("wt")
}

// TestReshapedBinary: a chunk read in binary is read again when its shape
// changed under it in a way its values cannot follow.
func TestReshapedBinary(t *testing.T) {
	col := func(name string, num int16, oid uint32) change.Column {
		return change.Column{Name: name, Num: num, TypeOID: oid, BaseOID: oid}
	}
	read := &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 23), col("s", 3, 25)}, Key: []int{0}}
	bin := []change.Row{{change.Text("1"), {Text: "\x00\x00\x00\x01", Binary: true}, {Text: "a", Binary: true}}}
	text := []change.Row{{change.Text("1"), change.Text("1"), change.Text("a")}}
	readAt := &change.Table{Columns: append(append([]change.Column(nil), read.Columns...), col("at", 4, 1184)), Key: []int{0}}
	withAt := []change.Row{append(append(change.Row(nil), bin[0]...), change.Value{Text: "\x00\x00\x00\x00\x00\x00\x00\x01", Binary: true})}
	for _, tc := range []struct {
		name string
		to   *change.Table
		rows []change.Row
		want bool
	}{
		{"the same shape", read, bin, false},
		{"an equal shape", &change.Table{Columns: read.Columns, Key: []int{0}}, bin, false},
		{"a column widened", &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 20), col("s", 3, 25)}, Key: []int{0}}, bin, true},
		{"a column renamed", &change.Table{Columns: []change.Column{col("id", 1, 20), col("m", 2, 23), col("s", 3, 25)}, Key: []int{0}}, bin, false},
		{"a column added", &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 23), col("s", 3, 25), col("x", 4, 23)}, Key: []int{0}}, bin, true},
		{"a column dropped", &change.Table{Columns: []change.Column{col("id", 1, 20), col("s", 3, 25)}, Key: []int{0}}, bin, false},
		{"a column of a type not passed", &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 23), col("s", 3, 16390)}, Key: []int{0}}, bin, true},
		// The same columns and types, but the key now holds one whose
		// binary form tidemark does not encode from text.
		{"a key that cannot travel in binary", &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 23), col("s", 3, 25),
			col("at", 4, 1184)}, Key: []int{0, 3}}, withAt, true},
		{"the same with the old key", &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 23), col("s", 3, 25),
			col("at", 4, 1184)}, Key: []int{0}}, withAt, false},
		{"a text chunk", &change.Table{Columns: []change.Column{col("id", 1, 20), col("n", 2, 20), col("s", 3, 25)}, Key: []int{0}}, text, false},
	} {
		from := read
		if len(tc.rows[0]) == len(readAt.Columns) {
			from = readAt
		}
		if got := reshapedBinary(ChunkRead{Table: from, Rows: tc.rows}, tc.to); got != tc.want {
			t.Errorf("%s: reshapedBinary = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReshapedText: a chunk read in text is read again only when a column
// it read was widened to a type whose text differs.
func TestReshapedText(t *testing.T) {
	col := func(name string, num int16, oid uint32) change.Column {
		return change.Column{Name: name, Num: num, TypeOID: oid, BaseOID: oid}
	}
	read := &change.Table{Columns: []change.Column{col("id", 1, 23), col("r", 2, 700)}, Key: []int{0}}
	for _, tc := range []struct {
		name string
		to   *change.Table
		want bool
	}{
		{"the same shape", read, false},
		{"integer to bigint", &change.Table{Columns: []change.Column{col("id", 1, 20), col("r", 2, 700)}, Key: []int{0}}, false},
		{"real to double precision", &change.Table{Columns: []change.Column{col("id", 1, 23), col("r", 2, 701)}, Key: []int{0}}, true},
		{"renamed and widened", &change.Table{Columns: []change.Column{col("id", 1, 23), col("d", 2, 701)}, Key: []int{0}}, true},
		{"dropped", &change.Table{Columns: []change.Column{col("id", 1, 23)}, Key: []int{0}}, false},
	} {
		if got := reshapedText(ChunkRead{Table: read}, tc.to); got != tc.want {
			t.Errorf("%s: reshapedText = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFirstChunkBinaryOnWhatCheckSaw: a table's first chunk is read in
// binary on the types the sink saw in the check that Initiate makes. A
// destination column widened by hand after that check (int to bigint,
// which the check would have let be) refuses the chunk in its own
// transaction, as the binary int does not read as a bigint: the table's
// object fails and says what to do, the stream goes on with the other
// table, and the backfill initiated again reads text (the refusal and the
// new check showed the sink the new type) and completes.
func TestFirstChunkBinaryOnWhatCheckSaw(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dest: "postgres", setup: `
		CREATE TABLE fb (id int PRIMARY KEY, n int, at timestamptz);
		INSERT INTO fb SELECT g, g * 1000, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour' FROM generate_series(1, 300) g;
		CREATE TABLE other (id int PRIMARY KEY, v text);`})
	gate := e.initiateHeld("fb", 1)
	e.execInDest(`ALTER TABLE fb ALTER COLUMN n TYPE bigint`)
	gate.open()
	fb := change.TableID{Schema: "public", Name: "fb"}
	e.waitFailed(fb, "no longer has the source's type", "initiate the backfill again")
	e.exec(`INSERT INTO other VALUES (1, 'after the refusal')`)
	dst := e.connectDest()
	e.waitFor("the other table's change streamed", func() bool {
		var n int
		err := dst.QueryRow(e.ctx, `SELECT count(*) FROM other WHERE v = 'after the refusal'`).Scan(&n)
		return err == nil && n == 1
	})
	if _, err := e.s.Initiate(e.ctx, []change.TableID{fb}, store.StartedByAPI, nil); err != nil {
		t.Fatal(err)
	}
	e.waitLoaded("fb")
	e.assertConverged("fb")
}
