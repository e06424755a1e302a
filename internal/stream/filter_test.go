package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source/pg"
	"github.com/tidemark/tidemark/internal/store"
)

// thingsSetup is a table of many types, with two notes that only differ in
// how a backslash in a literal is read: a\b'c and a<backspace>'c.
const thingsSetup = `
	CREATE TABLE things (id int PRIMARY KEY, region text, amount int NOT NULL, price numeric(10,2),
		big bigint, ratio float8, flag bool, note text, born date, at timestamptz);
	INSERT INTO things SELECT g, CASE g % 4 WHEN 0 THEN 'eu' WHEN 1 THEN 'us' WHEN 2 THEN 'EU' END,
		g, g * 1.25, g * 100000000::bigint, g / 100.0, g % 2 = 0, 'n' || g,
		date '2025-01-01' + g % 60, timestamptz '2025-01-01 00:00:00+00' + g * interval '7 hours'
	FROM generate_series(1, 200) g;
	INSERT INTO things (id, amount, note) VALUES (1001, 0, 'a\b''c'), (1002, 0, E'a\b''c'), (1003, 0, 'ab');`

// TestFilterSelectsExactRows reads a table through the source with allowed
// filters, the source role reading strings the old way
// (standard_conforming_strings off), and compares the rows with those the
// same condition selects in SQL. A literal with a backslash and a quote
// selects exactly the row it names.
func TestFilterSelectsExactRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: thingsSetup})
	var db string
	if err := e.src.QueryRow(e.ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	e.exec(fmt.Sprintf("ALTER ROLE CURRENT_USER IN DATABASE %s SET standard_conforming_strings = off", db))
	// The test's own connection reads the conditions as the filter parser
	// does, in UTC as tidemark's sessions do.
	e.exec("SET standard_conforming_strings = on; SET TimeZone = 'UTC'")
	src, err := pg.Open(e.ctx, pg.Config{DSN: e.srcDSN}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var scs string
	if err := src.Pool().QueryRow(e.ctx, "SHOW standard_conforming_strings").Scan(&scs); err != nil {
		t.Fatal(err)
	}
	t.Logf("the source's sessions have standard_conforming_strings %s", scs)
	table, err := src.Describe(e.ctx, change.TableID{Schema: "public", Name: "things"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range []string{
		`note = 'a\b''c'`,
		`note = E'a\\b''c'`,
		`note LIKE 'a\\b%' OR note = 'a' || 'b'`,
		`region = 'eu'`,
		`'us' = region AND NOT flag`,
		`amount BETWEEN 10 AND 20 AND NOT flag`,
		`amount NOT BETWEEN SYMMETRIC 190 AND 20`,
		`amount IN (1, 2, 3) OR region IS NULL`,
		`amount NOT IN (1, 2) AND region NOT LIKE 'u%'`,
		`price > 12.5 AND price <= 20`,
		`big > 3000000000`,
		`ratio < 0.5e0`,
		`born >= '2025-01-15' AND born < date '2025-02-01'`,
		`at >= '2025-01-15 00:00:00+00' AND at < timestamptz '2025-01-20' - interval '1 day'`,
		`date_trunc('month', at) = '2025-02-01 00:00:00+00'`,
		`extract(day from born) = 3 OR date_part('dow', born) = 0`,
		`lower(region) ILIKE 'E%'`,
		`length(note) > 3 AND substring(note from 2 for 1) = '1'`,
		`coalesce(region, 'none') = 'none'`,
		`amount % 7 = 0 AND -amount < -50`,
		`amount::text LIKE '1%'`,
		`CAST(price AS int) = 13 OR round(price) = 25`,
		`region IS DISTINCT FROM 'eu'`,
		`abs(amount - 100) <= 5`,
		`greatest(amount, 50) = 50 AND least(amount, 10) = amount`,
		`nullif(region, 'us') IS NULL`,
		`trim(both 'n' from note) = '12' OR upper(note) = 'N13'`,
		`note LIKE 'n1!%' ESCAPE '!' OR note LIKE 'n19%'`,
		`(amount + 1) * 2 - 4 / 2 = 201 OR amount ^ 2 = 144`,
		`flag = true AND amount < 9`,
		`born = make_date(2025, 1, 3)`,
	} {
		f, err := rowfilter.Parse(cond)
		if err != nil {
			t.Errorf("filter %s: %v", cond, err)
			continue
		}
		if err := src.CheckFilter(e.ctx, table, f); err != nil {
			t.Errorf("check filter %s: %v", cond, err)
			continue
		}
		chunk, err := src.ReadChunk(e.ctx, table, pg.ReadOptions{Filter: f})
		if err != nil {
			t.Errorf("read with filter %s: %v", cond, err)
			continue
		}
		var got []string
		for _, r := range chunk.Rows {
			got = append(got, r[0].Text)
		}
		var want []string
		rows, err := e.src.Query(e.ctx, "SELECT id::text FROM things WHERE "+cond+" ORDER BY things.id")
		if err != nil {
			t.Fatalf("%s in SQL: %v", cond, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		if rows.Err() != nil {
			t.Fatalf("%s in SQL: %v", cond, rows.Err())
		}
		if len(want) == 0 || len(want) == 203 {
			t.Errorf("filter %s selects %d rows in SQL: make it select some", cond, len(want))
		}
		if !slices.Equal(got, want) {
			t.Errorf("filter %s: rows %v, want %v", cond, got, want)
		}
	}
	// The note with a backslash and a quote is the one row that holds them.
	f, _ := rowfilter.Parse(`note = 'a\b''c'`)
	chunk, err := src.ReadChunk(e.ctx, table, pg.ReadOptions{Filter: f})
	if err != nil || len(chunk.Rows) != 1 || chunk.Rows[0][0].Text != "1001" {
		t.Fatalf(`filter note = 'a\b''c': %v %v; want row 1001 alone`, chunk.Rows, err)
	}
}

// TestCheckFilterRefusals: a column the table lacks names the table's
// columns; a condition the source cannot type is the source's refusal.
func TestCheckFilterRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: thingsSetup})
	src, err := pg.Open(e.ctx, pg.Config{DSN: e.srcDSN}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	table, err := src.Describe(e.ctx, change.TableID{Schema: "public", Name: "things"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var refused *rowfilter.Error
	f, _ := rowfilter.Parse("nosuch = 1")
	if err := src.CheckFilter(e.ctx, table, f); !errors.As(err, &refused) || !strings.Contains(err.Error(), `column "nosuch" does not exist in public.things: its columns are id, region,`) {
		t.Errorf("unknown column: %v", err)
	}
	f, _ = rowfilter.Parse("region = 1")
	if err := src.CheckFilter(e.ctx, table, f); !errors.Is(err, pg.ErrFilter) || !strings.Contains(err.Error(), "operator does not exist: text pg_catalog.= integer") {
		t.Errorf("a text compared with a number: %v", err)
	}
}

// TestStoredFilterRefusedAtStart: backfills recorded with a filter the
// grammar now refuses — pending, scheduled, and active (to be resumed) —
// fail when they start, saying why and how to initiate again, and their
// SQL never runs: no large object is created, no advisory lock taken.
func TestStoredFilterRefusedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{setup: `
		CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY); CREATE TABLE c (id int PRIMARY KEY);
		INSERT INTO a VALUES (1); INSERT INTO b VALUES (1); INSERT INTO c VALUES (1);`, yaml: "backfill: {mode: manual}"})
	soon := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	recs := []store.Backfill{
		{Table: "a", Status: StatusPending, Options: map[string]any{optFilter: "lo_from_bytea(0, 'pwned') > 0"}},
		{Table: "b", Status: StatusPending, Options: map[string]any{optFilter: "pg_advisory_lock(4242) IS NOT NULL", optRunAt: soon}},
		{Table: "c", Status: StatusActive, Options: map[string]any{optFilter: "id IN (SELECT lo_from_bytea(0, 'pwned2'))"}},
	}
	for i := range recs {
		recs[i].Stream, recs[i].Schema, recs[i].StartedBy = e.cfg.Name, "public", store.StartedByCLI
		if err := e.st.CreateBackfill(e.ctx, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	for _, rec := range recs {
		var b store.Backfill
		e.waitFor(fmt.Sprintf("backfill of %s ended", rec.Table), func() bool {
			var err error
			if b, err = e.st.GetBackfill(e.ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			return b.Status != StatusPending && b.Status != StatusActive
		})
		if b.Status != StatusFailed || !strings.Contains(b.Error, "tidemark refused the filter: ") ||
			!strings.Contains(b.Error, "initiate the backfill again") || b.RowsRead != 0 {
			t.Errorf("stored backfill of %s: %s, %d rows read, error %q; want failed, naming the function and how to initiate again",
				rec.Table, b.Status, b.RowsRead, b.Error)
		}
	}
	var objects, locks int
	if err := e.src.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM pg_largeobject_metadata),
		(SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		 WHERE l.locktype = 'advisory' AND d.datname = current_database())`).Scan(&objects, &locks); err != nil {
		t.Fatal(err)
	}
	if objects != 0 || locks != 0 {
		t.Fatalf("the stored filters ran: %d large objects, %d advisory locks", objects, locks)
	}
}
