package mysql

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/rowfilter"
	"github.com/tidemark/tidemark/internal/source"
)

// filterRows is a table of mixed types: text under a _ci and a _bin
// collation and in latin1, integers past 2^53, unsigned, decimal, double,
// dates, an enum, NULLs, and values holding quotes, comments, backticks
// and a backslash.
var filterRows = []string{
	`CREATE TABLE f (id int PRIMARY KEY, name varchar(40) COLLATE utf8mb4_general_ci, code varchar(40) COLLATE utf8mb4_bin,
	  l1 varchar(20) CHARACTER SET latin1, n bigint, m int, u bigint unsigned, d decimal(20,6), x double,
	  dt datetime(6), dd date, e enum('a','b','c'))`,
	`INSERT INTO f VALUES
	 (1, 'Alice', 'Alice', 'café', 6, 3, 1, 1.5, 2.5, '2024-01-05 10:00:00.5', '2023-03-01', 'a'),
	 (2, 'alice', 'alice', 'cafe', 7, -3, 18446744073709551615, 0.2, 0.5, '2024-02-01', '2024-01-01', 'b'),
	 (3, 'ALICE ', 'ALICE', NULL, 9007199254740992, NULL, 5, 2.75, 1.0, '2023-12-31 23:59:59', NULL, 'c'),
	 (4, 'Bob', 'Bob', 'x', 9007199254740993, 5, NULL, NULL, NULL, NULL, '2023-07-04', 'b'),
	 (5, 'émile', 'émile', 'é', -2, 1, 0, -1.25, 3.0, '2024-01-31 23:59:59.999999', '2022-01-01', NULL),
	 (6, NULL, 'Bobby', NULL, NULL, 9, 7, 100.000001, 4.5, '2024-01-15', '2023-01-01', 'a'),
	 (7, 'x''; DROP TABLE f; --', 'a` + "`b`" + ` /* c */', 'y', 12, 0, 2, 2, 2, '2021-06-01', '2021-06-01', 'c'),
	 (8, CONCAT('a', CHAR(92), CHAR(39)), 'a%b', 'z', 1, 4, 3, 0.25, -7.5, '2024-01-01', '2024-01-01', 'a'),
	 (9, '100%', 'Blip', 'w', 3, -1, 4, 1.000001, 0, '2022-02-02', '2022-02-02', 'b')`,
}

// filterCases pair a filter with the hand-written MySQL condition that
// selects the rows it must select, or with the reason it is refused.
var filterCases = []struct{ filter, where, refused string }{
	{filter: `name = 'alice'`, where: `name = 'alice'`}, // _ci, and PAD SPACE: 'ALICE ' too
	{filter: `code = 'alice'`, where: `code = 'alice'`},
	{filter: `name LIKE 'al%'`, where: `name LIKE 'al%'`},
	{filter: `name ILIKE 'AL%'`, where: `LOWER(name) LIKE 'al%'`},
	{filter: `code LIKE 'A%'`, where: `code LIKE 'A%'`},
	{filter: `code ILIKE 'a%'`, where: `LOWER(code) LIKE 'a%'`},
	{filter: `code NOT LIKE 'a!%%' ESCAPE '!'`, where: `code NOT LIKE 'a!%%' ESCAPE '!'`},
	{filter: `name LIKE '%\%'`, where: `name LIKE '%\\%'`},
	{filter: `name || '!' = 'Bob!'`, where: `CONCAT(name, '!') = 'Bob!'`},
	{filter: `l1 = 'café'`, where: `l1 = 'café'`},
	{filter: `n / 2 = 3`, where: `n DIV 2 = 3`},
	{filter: `x / 2 > 1`, where: `x / 2 > 1`},
	{filter: `n ^ 2 > 40`, where: `POW(n, 2) > 40`},
	{filter: `name IS DISTINCT FROM 'Bob'`, where: `NOT (name <=> 'Bob')`},
	{filter: `m IS NOT DISTINCT FROM NULL`, where: `m IS NULL`},
	{filter: `n IN (6, 7, NULL)`, where: `n IN (6, 7)`},
	{filter: `n NOT IN (6, 7)`, where: `n NOT IN (6, 7)`},
	{filter: `n BETWEEN SYMMETRIC 10 AND 1`, where: `n BETWEEN 1 AND 10`},
	{filter: `u = '18446744073709551615'`, where: `u = 18446744073709551615`},
	{filter: `n = '9007199254740993'`, where: `n = 9007199254740993`}, // as a string MySQL would match 2^53 too
	{filter: `d > 1.5`, where: `d > 1.5`},
	{filter: `d < 2.5e-1`, where: `d < 0.25`},
	{filter: `d = '2'`, where: `d = 2`},
	{filter: `'15e-1' = d`, where: `d = 1.5`},
	{filter: `dt >= '2024-01-01' AND dt < '2024-02-01'`, where: `dt >= '2024-01-01' AND dt < '2024-02-01'`},
	{filter: `extract(month from dt) = 1`, where: `MONTH(dt) = 1`},
	{filter: `date_part('year', dd) = 2023`, where: `YEAR(dd) = 2023`},
	{filter: `length(name) = 5`, where: `CHAR_LENGTH(name) = 5`},
	{filter: `octet_length(name) = 6`, where: `OCTET_LENGTH(name) = 6`},
	{filter: `substring(name, 2, 3) = 'lic'`, where: `SUBSTRING(name, 2, 3) = 'lic'`},
	{filter: `substr(code, 2) = 'lice'`, where: `SUBSTRING(code, 2) = 'lice'`},
	{filter: `left(code, 1) = 'B'`, where: `LEFT(code, 1) = 'B'`},
	{filter: `right(code, 2) = 'ob'`, where: `RIGHT(code, 2) = 'ob'`},
	{filter: `position('li' in code) = 2`, where: `INSTR(code, 'li') = 2`},
	{filter: `greatest(n, m) > 6`, where: `COALESCE(GREATEST(n, m), n, m) > 6`},
	{filter: `least(n, m) < 2`, where: `COALESCE(LEAST(n, m), n, m) < 2`},
	{filter: `coalesce(m, 0) = 0`, where: `COALESCE(m, 0) = 0`},
	{filter: `nullif(name, 'Bob') IS NULL`, where: `NULLIF(name, 'Bob') IS NULL`},
	{filter: `cast(n as text) = '7'`, where: `CAST(n AS CHAR) = '7'`},
	{filter: `n::numeric(10,2) > 6.5`, where: `CAST(n AS DECIMAL(10,2)) > 6.5`},
	{filter: `e = 'b'`, where: `e = 'b'`},
	{filter: `abs(m) = 3 OR mod(m, 4) = 1`, where: `ABS(m) = 3 OR MOD(m, 4) = 1`},
	{filter: `trunc(d) = 1 AND round(x) >= 0`, where: `TRUNCATE(d, 0) = 1 AND ROUND(x) >= 0`},
	{filter: `NOT (n > 5) AND -m < 0`, where: `NOT (n > 5) AND -m < 0`},
	{filter: `n % 2 = 1 AND upper(code) <> 'X'`, where: `n % 2 = 1 AND UPPER(code) <> 'X'`},
	{filter: `rtrim(name) = 'ALICE' AND true`, where: `RTRIM(name) = 'ALICE'`},
	// Hostile values: only ever parameters.
	{filter: `name = 'x''; DROP TABLE f; --'`, where: `id = 7`},
	{filter: "code = 'a`b` /* c */' OR name = 'a\\'''", where: `id IN (7, 8)`},
	{filter: `name = '100%' OR code = '"; DELETE FROM f; #'`, where: `id = 9`},
	// Refused, with the reason.
	{filter: `d / 2 > 1`, refused: "/ is allowed between integers"},
	{filter: `substring(name, 0, 2) = 'A'`, refused: "substring: write its position (1 or more)"},
	{filter: `left(name, -1) = 'A'`, refused: "left: write its position"},
	{filter: `name = 1`, refused: "column name is text and 1 is not"},
	{filter: `n = 'abc'`, refused: `column n is a whole number and "abc" is not one`},
	{filter: `n = '1.5'`, refused: `column n is a whole number and "1.5" is not one`},
	{filter: `d = 'x'`, refused: `column d is a number and "x" is not one`},
	{filter: `initcap(name) = 'Bob'`, refused: "function initcap has no MySQL twin"},
	{filter: `md5(name) = 'x'`, refused: "function md5 has no MySQL twin"},
	{filter: `btrim(name, 'x') = 'a'`, refused: "btrim with characters to trim"},
	{filter: `cast(dt as timestamptz) > '2024-01-01'`, refused: "cast to timestamptz has no MySQL twin"},
	{filter: `date_part('second', dt) = 0`, refused: "date_part('second', ...) has no MySQL twin"},
	{filter: `n LIKE '1%'`, refused: "LIKE on column n, which is not text"},
	{filter: `nosuch = 1`, refused: `column "nosuch" does not exist`},
}

// TestFilterSelectsAsTheSource reads the table through each filter and
// compares the rows with those the server selects with the hand-written
// condition; refused filters are refused by CheckFilter and ReadChunk with
// the reason.
func TestFilterSelectsAsTheSource(t *testing.T) {
	src, root, tbl := filterTable(t)
	ctx := context.Background()
	ss := &streamSource{src: src}
	all := serverIDs(t, root, "TRUE")
	for _, c := range filterCases {
		f, err := rowfilter.Parse(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		checkErr := ss.CheckFilter(ctx, tbl, f)
		chunk, readErr := ss.ReadChunk(ctx, tbl, source.ReadOptions{Filter: f})
		if c.refused != "" {
			var refused *rowfilter.Error
			if !errors.As(checkErr, &refused) || !strings.Contains(checkErr.Error(), c.refused) {
				t.Errorf("%s: CheckFilter: %v, want refused with %q", c.filter, checkErr, c.refused)
			}
			if readErr == nil || !strings.Contains(readErr.Error(), c.refused) {
				t.Errorf("%s: ReadChunk: %v, want refused with %q", c.filter, readErr, c.refused)
			}
			continue
		}
		if checkErr != nil || readErr != nil {
			t.Errorf("%s: CheckFilter: %v; ReadChunk: %v", c.filter, checkErr, readErr)
			continue
		}
		var got []int
		for _, r := range chunk.Rows {
			id, _ := strconv.Atoi(r[0].Text)
			got = append(got, id)
		}
		want := serverIDs(t, root, c.where)
		if !slices.Equal(got, want) {
			t.Errorf("%s: read ids %v, the server selects %v (WHERE %s)", c.filter, got, want, c.where)
		}
		if len(want) == 0 || len(want) == len(all) {
			t.Errorf("%s selects %v of %v: the case tells nothing", c.filter, want, all)
		}
	}
	if got := serverIDs(t, root, "TRUE"); !slices.Equal(got, all) {
		t.Errorf("the table changed under the filters: %v, was %v", got, all)
	}
}

// filterTable creates the table of filterRows and describes it.
func filterTable(t *testing.T) (*Source, *client.Conn, *change.Table) {
	t.Helper()
	src, root := testDB(t, filterRows...)
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "f"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src, root, tbl
}

func serverIDs(t *testing.T, root *client.Conn, where string) []int {
	t.Helper()
	r, err := root.Execute("SELECT id FROM f WHERE " + where + " ORDER BY id")
	if err != nil {
		t.Fatalf("WHERE %s: %v", where, err)
	}
	var ids []int
	for i := range r.RowNumber() {
		id, _ := r.GetInt(i, 0)
		ids = append(ids, int(id))
	}
	return ids
}

// TestFilterServerRefusal: what the renderer lets through but the server
// refuses is source.ErrFilter with the server's message, and one failing
// on a row fails the read as permanent; a column the server's table lacks
// is refused naming it.
func TestFilterServerRefusal(t *testing.T) {
	src, _, tbl := filterTable(t)
	ctx := context.Background()
	f, _ := rowfilter.Parse(`2 ^ 5000 > n`)
	if err := src.CheckFilter(ctx, tbl, f); !errors.Is(err, source.ErrFilter) || !strings.Contains(err.Error(), "DOUBLE value is out of range") {
		t.Errorf("CheckFilter of an overflow: %v", err)
	}
	// A filter the server prepares but that fails on a row fails the read
	// for good: a retry would read the same row.
	f, _ = rowfilter.Parse(`n * 10000 > 0`)
	_, err := src.ReadChunk(ctx, tbl, ReadOptions{Filter: f})
	var perm *source.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "BIGINT value is out of range") {
		t.Errorf("a filter failing on a row: %v", err)
	}
	// The stream's table has a column the server's has lost.
	old := *tbl
	old.Columns = append(slices.Clone(tbl.Columns), change.Column{Name: "gone", Native: "int", Type: "int4"})
	f, _ = rowfilter.Parse(`gone = 1`)
	err = src.CheckFilter(ctx, &old, f)
	var refused *rowfilter.Error
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), `column "gone" does not exist`) {
		t.Errorf("CheckFilter on a dropped column: %v", err)
	}
}

// TestReadChunkColumns reads the key and the named columns only, the
// others Unchanged, with a filter on a column not read.
func TestReadChunkColumns(t *testing.T) {
	src, _, tbl := filterTable(t)
	ctx := context.Background()
	f, _ := rowfilter.Parse(`n > 6 AND n < 100`)
	c, err := (&streamSource{src: src}).ReadChunk(ctx, tbl, source.ReadOptions{Filter: f, Columns: []string{"code", "e"}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range c.Rows {
		if len(r) != len(tbl.Columns) {
			t.Fatalf("row of %d values, the table has %d columns", len(r), len(tbl.Columns))
		}
		for i, v := range r {
			name := tbl.Columns[i].Name
			if read := name == "id" || name == "code" || name == "e"; read == v.Unchanged {
				t.Errorf("row %s column %s: %+v", r[0].Text, name, v)
			}
		}
		got = append(got, r[0].Text+"/"+r[2].Text+"/"+r[11].Text)
	}
	if want := []string{"2/alice/b", "7/a`b` /* c *//c"}; !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	_, err = src.ReadChunk(ctx, tbl, ReadOptions{Columns: []string{"nosuch"}})
	var perm *source.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), `has no column "nosuch"`) {
		t.Errorf("a column the table lacks: %v", err)
	}
}

// FuzzFilterSQL renders whatever rowfilter accepts: the renderer must not
// panic, and the SQL it writes holds the table's quoted columns, its own
// keywords and one placeholder per argument, never a literal's text.
func FuzzFilterSQL(f *testing.F) {
	for _, c := range filterCases {
		f.Add(c.filter)
	}
	for _, s := range []string{`name = E'\'; DROP TABLE f; --'`, "\"a`b\" = 'x'", `name = '/*' || '*/'`, `n = 0x1F and x = 1e308`,
		`name = $$a'b$$`, `name like 'a\' escape '\'`, `greatest(n, m, u, 1.5, '2') > -(-1)`} {
		f.Add(s)
	}
	tbl := &change.Table{ID: change.TableID{Schema: "db", Name: "f"}, Key: []int{0}}
	for _, c := range [][2]string{{"id", "int"}, {"name", "varchar(40)"}, {"code", "varchar(40)"}, {"n", "bigint"},
		{"m", "int"}, {"u", "bigint unsigned"}, {"d", "decimal(20,6)"}, {"x", "double"}, {"dt", "datetime(6)"}, {"a`b", "text"}} {
		tbl.Columns = append(tbl.Columns, change.Column{Name: c[0], Native: c[1], Collation: "utf8mb4_general_ci"})
	}
	f.Fuzz(func(t *testing.T, text string) {
		filter, err := rowfilter.Parse(text)
		if err != nil {
			return
		}
		sql, args, err := filterSQL(filter, tbl)
		if err != nil {
			var refused *rowfilter.Error
			if !errors.As(err, &refused) {
				t.Fatalf("%s: %T %v", text, err, err)
			}
			return
		}
		bare := sql
		for _, c := range tbl.Columns {
			bare = strings.ReplaceAll(bare, quoteIdent(c.Name), "")
		}
		if strings.ContainsAny(bare, "'\"`;#\\$") || strings.Contains(bare, "--") || strings.Contains(bare, "/*") {
			t.Fatalf("%s: rendered %s", text, sql)
		}
		if n := strings.Count(bare, "?"); n != len(args) {
			t.Fatalf("%s: %d placeholders for %d arguments in %s", text, n, len(args), sql)
		}
		for _, w := range strings.FieldsFunc(bare, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') }) {
			if w != strings.ToUpper(w) {
				t.Fatalf("%s: %q reached the SQL: %s", text, w, sql)
			}
		}
	})
}
