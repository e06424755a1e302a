package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink/files"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// filesTable is table t of the crash tests, as the files' events carry it.
var filesTable = &change.Table{ID: change.TableID{Schema: "public", Name: "t"}, Key: []int{0}, Columns: []change.Column{
	{Name: "id", Tag: change.TagInt64}, {Name: "v", Tag: change.TagInt32}, {Name: "note", Tag: change.TagText},
}}

// TestSIGKILLIntoFiles streams into a files destination while a writer
// runs and a table is backfilled, and kills the daemon twice: once by the
// failpoint between two renames of one batch's files, once by the test
// while chunks are read. After restarts the files replay to exactly the
// source's rows, and no live change (its transaction, position, operation
// and key) is in the files twice.
func TestSIGKILLIntoFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "files")
	// Kill 1: the daemon kills itself between two renames of a batch (a
	// chunk of 1,000 rows fills several 64 KiB files).
	e := startEventCrash(t, "filescrash", crashRows/2, fmt.Sprintf(`{type: files, path: %q, max_file_bytes: 65536}`, out),
		"TIDEMARK_TEST_FILES_KILL_BETWEEN_RENAMES=3")
	e.killedItself("between two renames")
	if leftovers := tempFiles(t, out); leftovers == 0 {
		t.Error("no temp file was left by the kill between renames: the failpoint did not hit a batch mid-way")
	}
	e.restartAndKillMidChunks()
	e.waitReplay(func() (*event.Replica, error) { return files.ReadTable(out, e.stream, filesTable) })
	if dups := duplicateChanges(t, fileEvents(t, out)); dups != "" {
		t.Errorf("live changes written twice:\n%s", dups)
	}
	e.finish()
}

// eventCrash is a crash test of a stream into an event destination: a
// source table t, a writer, a backfill of t, and a daemon killed twice.
type eventCrash struct {
	*crashEnv
	rows     int // in t at the start
	src      *pgx.Conn
	backfill func() store.Backfill
	writes   func() int
}

// startEventCrash starts the daemon streaming a new source table t of
// rows rows into dest (a YAML flow mapping) with the failpoint env set,
// starts the writer and initiates the backfill. The stream name is the
// test's own: replication slots are named per server.
func startEventCrash(t *testing.T, stream string, rows int, dest string, failpoint string) *eventCrash {
	ctx := context.Background()
	srcDSN, err := server.CreateDatabase(ctx, stream+"_src")
	if err != nil {
		t.Fatal(err)
	}
	src, err := pgx.Connect(ctx, srcDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(ctx) })
	if _, err := src.Exec(ctx, fmt.Sprintf(`CREATE TABLE t (id bigint PRIMARY KEY, v int, note text);
		INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %d) g`, rows)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tidemark.yaml")
	metaPath := filepath.Join(dir, "meta.db")
	addr := freeAddr(t)
	err = os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "%s"}
streams:
  - name: %s
    source: {type: postgres, dsn: "%s"}
    destination: %s
    include: ["public.t"]
    backfill: {mode: manual, chunk_size: 1000, rows_per_second: %d, chunk_write_target: 0}
    batch: {max_delay: 20ms}
    retry: {initial: 20ms, max: 500ms}
`, metaPath, addr, stream, srcDSN, dest, rows/4)), 0o600) // the backfill takes about 4 s: the kills land in it
	if err != nil {
		t.Fatal(err)
	}
	c := &crashEnv{t: t, ctx: ctx, cfgPath: cfgPath, srcDSN: srcDSN, addr: addr, stream: stream, env: []string{failpoint}}
	c.start()
	e := &eventCrash{crashEnv: c, rows: rows, src: src, backfill: c.watch(metaPath)}
	e.writes = startWriter(t, srcDSN)
	c.initiate()
	return e
}

// restartAndKillMidChunks restarts the daemon, kills it while chunks are
// read, restarts it again and waits for the backfill to complete.
func (e *eventCrash) restartAndKillMidChunks() {
	e.start()
	e.waitFor("half the table read", func() bool { return e.backfill().RowsRead >= int64(e.rows/2) })
	e.kill()
	e.start()
	e.waitFor("backfill completed", func() bool { return e.backfill().Status == store.StatusCompleted })
}

// waitReplay stops the writer and waits until what read replays equals
// the source's rows.
func (e *eventCrash) waitReplay(read func() (*event.Replica, error)) {
	e.t.Helper()
	n := e.writes()
	typ, err := source.Lookup("postgres")
	if err != nil {
		e.t.Fatal(err)
	}
	enc := typ.Encoder(e.stream, "", true, "test")
	deadline := time.Now().Add(5 * time.Minute)
	for {
		r, err := read()
		if err != nil {
			e.t.Fatal(err)
		}
		diff := replayDiff(e.t, e.ctx, e.src, enc, r)
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the destination does not replay to the source's rows: %s", diff)
		}
		// A replay reads everything written: poll once a second, and
		// stop if the daemon died.
		select {
		case <-e.done:
			e.t.Fatal("the daemon exited while the destination caught up")
		case <-time.After(time.Second):
		}
	}
	e.t.Logf("%d concurrent writes; backfill read %d rows", n, e.backfill().RowsRead)
}

func (e *eventCrash) finish() { e.stop() }

func tempFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".tmp") {
			n++
		}
		return nil
	})
	return n
}

// replayDiff compares the replica's rows with the source's, both as
// events' after objects; "" when equal.
func replayDiff(t testing.TB, ctx context.Context, src *pgx.Conn, enc *event.Encoder, r *event.Replica) string {
	rows, err := src.Query(ctx, "SELECT id::text, v::text, note FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for rows.Next() {
		var id, v string
		var note *string
		if err := rows.Scan(&id, &v, &note); err != nil {
			t.Fatal(err)
		}
		row := change.Row{change.Text(id), change.Text(v), change.Null}
		if note != nil {
			row[2] = change.Text(*note)
		}
		m, err := enc.Row(filesTable, row, event.Origin{})
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ After map[string]json.RawMessage }
		json.Unmarshal(m.Value, &e)
		b, _ := json.Marshal(e.After)
		want[id] = string(b)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	got := r.Rows()
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows replayed, the source has %d", len(got), len(want))
	}
	for _, g := range got {
		b, _ := json.Marshal(g)
		if w := want[string(g["id"])]; w != string(b) {
			return fmt.Sprintf("row %s: replayed %s, source %s", g["id"], b, w)
		}
	}
	return ""
}

// duplicateChanges lists live change events (c, u, d) that occur twice in
// events: the same transaction, position, operation and key.
func duplicateChanges(t *testing.T, events [][]byte) string {
	seen := map[string]int{}
	var dups []string
	for _, value := range events {
		var e struct {
			Op     string
			Before map[string]json.RawMessage
			After  map[string]json.RawMessage
			Source struct {
				TxID uint32 `json:"txId"`
				LSN  uint64
			}
		}
		if err := json.Unmarshal(value, &e); err != nil {
			t.Fatalf("%s: %v", value, err)
		}
		if e.Op != "c" && e.Op != "u" && e.Op != "d" {
			continue
		}
		id := e.After["id"]
		if e.Op == "d" {
			id = e.Before["id"]
		}
		k := fmt.Sprintf("tx %d lsn %d %s id %s", e.Source.TxID, e.Source.LSN, e.Op, id)
		if seen[k]++; seen[k] == 2 {
			dups = append(dups, k)
		}
	}
	if len(dups) > 10 {
		dups = append(dups[:10], fmt.Sprintf("… %d more", len(dups)-10))
	}
	return strings.Join(dups, "\n")
}

// fileEvents reads every event of the committed JSONL files under dir.
func fileEvents(t *testing.T, dir string) [][]byte {
	var out [][]byte
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl") || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			out = append(out, []byte(line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
