package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/store"
)

// collatedPrefixes start the keys of TestMySQLCollatedKeys: letters with
// case and accent variants, and punctuation that MariaDB's weights put
// between the letters ('_' after 'Z', '[' between 'Z' and '_'), where ICU
// or bytewise order would put them elsewhere; '€' is byte 0x80 in latin1,
// before 'é' under latin1_bin, and U+20AC, after it, in UTF-8.
var collatedPrefixes = []string{"a", "B", "_", "é", "z", "[", "0", "ß", "ÿ", "~", "€"}

// collatedVariants spells a character as the collations of the test fold
// it (case and accents); others keep their spelling.
var collatedVariants = map[rune][]string{
	'a': {"a", "A", "á", "Á"}, 'B': {"b", "B"}, 'é': {"e", "E", "é", "É", "è"},
	'z': {"z", "Z"}, 'ÿ': {"ÿ", "Ÿ"}, 'k': {"k", "K"},
}

// ucaVariants adds the spellings the UCA collations (unicode_ci,
// uca1400_ai_ci) fold too: ß as ss, accents as combining characters, and
// an ignorable character (U+200B) inside the key.
var ucaVariants = map[rune][]string{
	'a': {"a", "A", "á", "Á", "a\u0301", "A\u0300"}, 'B': {"b", "B", "b\u200B"}, 'é': {"e", "E", "é", "É", "è", "e\u0301", "E\u0300"},
	'z': {"z", "Z"}, 'ÿ': {"ÿ", "Ÿ", "y\u0308"}, 'k': {"k", "K", "\u200Bk"}, 'ß': {"ß", "ss", "SS", "sS", "ẞ"},
}

// variantsOf are the spellings a table's keys take.
func variantsOf(table string) map[rune][]string {
	if strings.HasPrefix(table, "k_uca") || strings.HasPrefix(table, "k_unicode") {
		return ucaVariants
	}
	return collatedVariants
}

// collatedKey is the i-th key in one spelling: a prefix, "k", a number,
// each letter in a random variant, and up to two trailing spaces (the same
// key under PAD SPACE, another under NO PAD).
func collatedKey(r *rand.Rand, i int, variants map[rune][]string) string {
	base := collatedPrefixes[i%len(collatedPrefixes)] + "k" + fmt.Sprintf("%03d", i/len(collatedPrefixes))
	var b strings.Builder
	for _, c := range base {
		if vs, ok := variants[c]; ok && r != nil {
			b.WriteString(vs[r.IntN(len(vs))])
		} else {
			b.WriteRune(c)
		}
	}
	if r != nil {
		b.WriteString(strings.Repeat(" ", r.IntN(3)))
	}
	return b.String()
}

// TestMySQLCollatedKeys backfills MariaDB tables keyed by VARCHAR columns
// under case- and accent-insensitive PAD SPACE collations
// (utf8mb4_general_ci, latin1_swedish_ci; and utf8mb4_general_nopad_ci, where
// trailing spaces count), and by latin1_bin, whose byte order is not
// UTF-8's, into SQLite and PostgreSQL while
// a writer respells keys (case, accents, trailing spaces: the same row to
// the source), deletes and re-inserts them in another spelling, and moves
// them across chunk boundaries. The objects complete, the destination
// holds exactly the source's rows in the source's spelling (one row per
// key the source calls equal), and verify in ranges other than the
// backfill's chunks finds every range equal. A key under a collation
// tidemark cannot reproduce (utf8mb4_german2_ci) still fails its object
// alone, with the fix.
func TestMySQLCollatedKeys(t *testing.T) {
	runCollatedKeys(t, "ci", 1500, 5*time.Millisecond, map[string]string{
		"k_general": "VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
		"k_latin1":  "VARCHAR(24) CHARACTER SET latin1 COLLATE latin1_swedish_ci",
		// NO PAD: trailing spaces make another key.
		"k_nopad": "VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_nopad_ci",
		// Binary, PAD SPACE, in latin1's byte order.
		"k_latin1bin": "VARCHAR(24) CHARACTER SET latin1 COLLATE latin1_bin",
	})
}

// TestMySQLUCAKeys is TestMySQLCollatedKeys for MariaDB's UCA collations
// (utf8mb4_uca1400_ai_ci, utf8mb4_unicode_ci: expansions, ignorables,
// contractions), where the writer also respells ß as ss, accents as
// combining characters, and adds an ignorable character (U+200B).
func TestMySQLUCAKeys(t *testing.T) {
	runCollatedKeys(t, "uca", 600, 10*time.Millisecond, map[string]string{
		"k_uca1400": "VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci",
		"k_unicode": "VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
	})
}

// runCollatedKeys backfills the tables (name → key column type), seeded
// with rows keys, into SQLite and PostgreSQL under a writer per table (a
// statement every pace: a UCA sort key costs PostgreSQL more), and
// checks the destination, verify, and that a table keyed under
// utf8mb4_german2_ci fails alone.
func runCollatedKeys(t *testing.T, dbPrefix string, rows int, pace time.Duration, tables map[string]string) {
	ctx := context.Background()
	srv, err := mysqlserver.Start(ctx, mysqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	names := make([]string, 0, len(tables))
	for name := range tables {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, dest := range []string{"sqlite", "postgres"} {
		t.Run(dest, func(t *testing.T) {
			db := fmt.Sprintf("%s%d", dbPrefix, i)
			dsn, err := srv.CreateDatabase(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			var setup []string
			for name, typ := range tables {
				setup = append(setup, fmt.Sprintf("CREATE TABLE %s (k %s PRIMARY KEY, n INT NOT NULL)", name, typ))
			}
			setup = append(setup, "CREATE TABLE k_german2 (k VARCHAR(24) COLLATE utf8mb4_german2_ci PRIMARY KEY)", "INSERT INTO k_german2 VALUES ('a'), ('B')")
			if err := srv.Exec(ctx, db, setup...); err != nil {
				t.Fatal(err)
			}
			seed := rand.New(rand.NewPCG(3, uint64(i)))
			for name := range tables {
				var vals []string
				var args []any
				for k := 0; k < rows; k++ {
					vals = append(vals, "(?, ?)")
					args = append(args, collatedKey(seed, k, variantsOf(name)), k)
				}
				execArgs(t, srv, db, "INSERT INTO "+name+" VALUES "+strings.Join(vals, ", "), args...)
			}
			e := mysqlEnv(t, dsn, db, dest)
			e.start()

			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w, name := range names {
				wg.Add(1)
				go func() {
					defer wg.Done()
					collatedWriter(t, srv, db, name, rand.New(rand.NewPCG(uint64(w), uint64(i))), rows, pace, stop)
				}()
			}
			// Stopped before the checks, and whichever way the test ends.
			stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
			defer stopWriters()
			var ids []change.TableID
			for name := range tables {
				id := change.TableID{Schema: db, Name: name}
				ids = append(ids, id)
				// Several writers keep the windows busy: on a loaded machine
				// the backfills take minutes.
				e.waitForWithin(5*time.Minute, id.String()+" completed and loaded", func() bool {
					o := e.objectOf(id)
					if o.Status == StatusFailed {
						t.Fatalf("backfill of %s failed: %s", id, o.Reason)
					}
					return o.Status == StatusCompleted && o.Loaded
				}, func() string {
					recs, _ := e.st.ListBackfills(e.ctx, store.BackfillFilter{Stream: e.cfg.Name})
					return fmt.Sprintf("object %+v; backfills %+v", e.objectOf(id), recs)
				})
			}
			stopWriters()
			for _, id := range ids {
				e.assertConvergedMySQL(id)
				if o := e.objectOf(id); o.Status != StatusCompleted {
					t.Fatalf("%s: status %s (%s), want completed", id, o.Status, o.Reason)
				}
			}
			checks, err := e.s.Verify(e.ctx, ids, 97)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range checks {
				if c.Error != "" || !c.Match || c.SourceRows != c.DestRows || len(c.Ranges) < 2 {
					t.Errorf("verify of %s: match=%v rows %d/%d, %d ranges, error %q", c.Object, c.Match, c.SourceRows, c.DestRows, len(c.Ranges), c.Error)
				}
			}
			refused := e.objectOf(change.TableID{Schema: db, Name: "k_german2"})
			if refused.Status != StatusFailed || !strings.Contains(refused.Reason, "utf8mb4_german2_ci") || !strings.Contains(refused.Reason, "keys:") {
				t.Fatalf("k_german2: status %s (%s), want failed naming the collation and the fix", refused.Status, refused.Reason)
			}
		})
	}
}

// collatedWriter changes table's keys until stop: respellings, deletes,
// re-inserts in another spelling (REPLACE), and moves to another key.
func collatedWriter(t *testing.T, srv *mysqlserver.Server, db, table string, r *rand.Rand, rows int, every time.Duration, stop <-chan struct{}) {
	w, err := srv.Root(context.Background())
	if err != nil {
		t.Error(err)
		return
	}
	defer w.Close()
	for _, q := range []string{"SET NAMES utf8mb4", "USE " + mysqlserver.QuoteIdent(db)} {
		if _, err := w.Execute(q); err != nil {
			t.Error(err)
			return
		}
	}
	name, variants := mysqlserver.QuoteIdent(table), variantsOf(table)
	// Paced, so that the stream keeps up on a loaded machine: a backfill's
	// chunk waits until the stream has applied past its read.
	pace := time.NewTicker(every)
	defer pace.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-pace.C:
		}
		k := r.IntN(rows + rows/4) // some keys beyond the seeded ones
		var q string
		var args []any
		switch r.IntN(4) {
		case 0:
			q, args = "UPDATE IGNORE "+name+" SET k = ?, n = n + 1 WHERE k = ?", []any{collatedKey(r, k, variants), collatedKey(r, k, variants)}
		case 1:
			q, args = "DELETE FROM "+name+" WHERE k = ?", []any{collatedKey(r, k, variants)}
		case 2:
			q, args = "REPLACE INTO "+name+" VALUES (?, ?)", []any{collatedKey(r, k, variants), n}
		default:
			q, args = "UPDATE IGNORE "+name+" SET k = ? WHERE k = ?", []any{collatedKey(r, r.IntN(rows+rows/4), variants), collatedKey(r, k, variants)}
		}
		if _, err := w.Execute(q, args...); err != nil {
			t.Errorf("%s %q: %v", q, args, err)
			return
		}
	}
}

// execArgs runs one statement with arguments as root in db.
func execArgs(t *testing.T, srv *mysqlserver.Server, db, q string, args ...any) {
	t.Helper()
	c, err := srv.Root(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range []string{"SET NAMES utf8mb4", "USE " + mysqlserver.QuoteIdent(db)} {
		if _, err := c.Execute(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Execute(q, args...); err != nil {
		t.Fatalf("%.60s…: %v", q, err)
	}
}
