package stream

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/source"
)

// TestMySQLTypesEndToEnd takes every type the MySQL source supports, at its
// edges (the mysql package's type table: integers signed and unsigned to
// 18446744073709551615, DECIMAL(65,30), FLOAT and DOUBLE, BIT(64), YEAR,
// dates and times to ±838:59:59, text in utf8mb4 with emoji and in latin1,
// binary values and a 16 MiB LONGBLOB, ENUM, SET, JSON, GEOMETRY), plus
// virtual and stored generated columns, into PostgreSQL and SQLite: first
// by the backfill, then the same values again as inserts the stream
// applies; both times each destination value equals what the source's
// codec reads, column by column, and the backfill's ending verify (row by
// row: the MySQL source sums no range) finds them equal.
func TestMySQLTypesEndToEnd(t *testing.T) {
	ctx := context.Background()
	srv, err := mysqlserver.Start(ctx, mysqlserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	session := []string{"SET NAMES utf8mb4", "SET time_zone = '+00:00'"}
	const genTable = "CREATE TABLE gen (id int PRIMARY KEY, a int, v bigint AS (a * 2) VIRTUAL, s varchar(20) AS (CONCAT('s', a)) STORED)"
	genRows := []string{"INSERT INTO gen (id, a) VALUES (1, 2147483647), (2, -5), (3, NULL)"}
	for i, dest := range []string{"postgres", "sqlite"} {
		t.Run(dest, func(t *testing.T) {
			db := fmt.Sprintf("types%d", i)
			dsn, err := srv.CreateDatabase(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			setup := append(append(append(session, mysqlserver.TypesTable, genTable), mysqlserver.TypesRows...), genRows...)
			if err := srv.Exec(ctx, db, setup...); err != nil {
				t.Fatal(err)
			}
			e := mysqlEnv(t, dsn, db, dest)
			e.start()
			src, err := source.Open(e.ctx, e.cfg.Source, source.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			types, gen := change.TableID{Schema: db, Name: "types"}, change.TableID{Schema: db, Name: "gen"}
			// The source is read once: under the race detector a read of
			// the 16 MiB value takes ten seconds.
			read := map[change.TableID]map[string]change.Row{}
			for _, id := range []change.TableID{types, gen} {
				o := e.waitLoadedID(id)
				read[id] = e.readSource(src, e.streamed(id))
				e.convergedTo(id, func(*change.Table) map[string]change.Row { return read[id] }, sameValues(3))
				// The ending verify agrees on every type.
				if b := e.waitVerified(o.BackfillID); b.Verify.Status != VerifyMatch {
					t.Errorf("%s: ending verify %+v, want a match", id, *b.Verify)
				}
			}
			// The same values again under keys 101 to 103, through the
			// binlog: the source holds the rows read and them rekeyed.
			streamed := append([]string{}, session...)
			for _, q := range append(append([]string{}, mysqlserver.TypesRows...), genRows...) {
				streamed = append(streamed, rekey(t, q))
			}
			if err := srv.Exec(ctx, db, streamed...); err != nil {
				t.Fatal(err)
			}
			for _, id := range []change.TableID{types, gen} {
				want := withRekeyed(t, e.streamed(id), read[id])
				e.convergedTo(id, func(*change.Table) map[string]change.Row { return want }, sameValues(6))
			}
		})
	}
}

// rekey moves an insert of rows 1, 2 and 3 to keys 101, 102 and 103.
func rekey(t *testing.T, insert string) string {
	t.Helper()
	out := insert
	for n := 1; n <= 3; n++ {
		out = strings.Replace(out, fmt.Sprintf("(%d, ", n), fmt.Sprintf("(%d, ", 100+n), 1)
		out = strings.Replace(out, fmt.Sprintf("VALUES (%d)", n), fmt.Sprintf("VALUES (%d)", 100+n), 1)
	}
	if out == insert {
		t.Fatalf("no key to move in %.60s…", insert)
	}
	return out
}

// withRekeyed is rows and, again, rows 1 to 3 under keys 101 to 103: what
// the source holds after the rekeyed inserts.
func withRekeyed(t *testing.T, tbl *change.Table, rows map[string]change.Row) map[string]change.Row {
	t.Helper()
	id := tbl.ColumnIndex("id")
	out := map[string]change.Row{}
	for k, r := range rows {
		out[k] = r
		moved := slices.Clone(r)
		n, err := strconv.Atoi(r[id].Text)
		if err != nil || n < 1 || n > 3 {
			t.Fatalf("row %s: key %q is not 1 to 3", k, r[id].Text)
		}
		moved[id].Text = strconv.Itoa(100 + n)
		out[tbl.RowKey(moved).Encode()] = moved
	}
	return out
}

// sameValues is a diff for convergedTo that wants rows rows and compares
// them value by value, naming the column and clipping long values.
func sameValues(rows int) func(t *change.Table, want map[string]change.Row, got []change.Row) string {
	return func(t *change.Table, want map[string]change.Row, got []change.Row) string {
		if len(want) != rows || len(got) != rows {
			return fmt.Sprintf("%d source rows and %d destination rows, want %d", len(want), len(got), rows)
		}
		var problems []string
		for _, g := range got {
			k := t.RowKey(g).Encode()
			w, ok := want[k]
			if !ok {
				problems = append(problems, "extra row "+k)
				continue
			}
			for i, c := range t.Columns {
				if w[i] != g[i] {
					problems = append(problems, fmt.Sprintf("row %s column %s (%s): %s, want %s", k, c.Name, c.Native, clipValue(g[i]), clipValue(w[i])))
				}
			}
		}
		return strings.Join(problems, "; ")
	}
}

func clipValue(v change.Value) string {
	if v.Null {
		return "NULL"
	}
	if len(v.Text) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", v.Text[:60], len(v.Text))
	}
	return fmt.Sprintf("%q", v.Text)
}
