package mysql

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tidemark/tidemark/internal/change"
)

// TestDescribeKeysAndNames covers the key choice (primary key, else a
// unique index over NOT NULL columns, else an error saying the fix) and
// identifiers with backticks, spaces and Unicode.
func TestDescribeKeysAndNames(t *testing.T) {
	odd := "we`ird ta´ble ü"
	src, _ := testDB(t,
		"CREATE TABLE "+quoteIdent(odd)+" (`a``b c` int NOT NULL, `ключ` varchar(10) NOT NULL, v text, PRIMARY KEY (`ключ`, `a``b c`))",
		"CREATE TABLE uniq (a int NULL, b int NOT NULL, c int NOT NULL, UNIQUE KEY z (b), UNIQUE KEY n (a), UNIQUE KEY m (c, b))",
		"CREATE TABLE nokey (a int, b int, UNIQUE KEY n (a))",
		"CREATE TABLE prefix (name varchar(50) NOT NULL, UNIQUE KEY p (name(5)))",
		"CREATE VIEW v AS SELECT 1 AS x",
		"INSERT INTO "+quoteIdent(odd)+" VALUES (1, 'k', 'v')",
	)
	ctx := context.Background()
	ids, err := src.ListTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, id := range ids {
		if id.Schema != src.Database() {
			t.Errorf("table %v outside the database", id)
		}
		names = append(names, id.Name)
	}
	if want := []string{"nokey", "prefix", "uniq", odd}; !slices.Equal(names, want) {
		t.Errorf("ListTables = %q, want %q", names, want)
	}
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: odd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k := tbl.KeyColumns(); len(k) != 2 || k[0].Name != "ключ" || k[1].Name != "a`b c" {
		t.Errorf("key = %+v", k)
	}
	rows := readAll(t, src, tbl)
	if len(rows) != 1 || rows[0][0].Text != "1" || rows[0][1].Text != "k" {
		t.Errorf("rows = %v", rows)
	}
	tbl, err = src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "uniq"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// m (c, b) comes first by name among the unique indexes of NOT NULL columns.
	if k := tbl.KeyColumns(); len(k) != 2 || k[0].Name != "c" || k[1].Name != "b" {
		t.Errorf("uniq key = %+v, want (c, b)", k)
	}
	_, err = src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "nokey"}, nil)
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "ADD PRIMARY KEY") {
		t.Errorf("nokey: %v, want ErrNoKey with the fix", err)
	}
	// A unique index on a prefix is not unique on the column.
	if _, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "prefix"}, nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("prefix: %v, want ErrNoKey", err)
	}
	tbl, err = src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "nokey"}, []string{"b"})
	if err != nil || tbl.KeyColumns()[0].Name != "b" {
		t.Errorf("nokey with keys b: %v %v", tbl, err)
	}
	if _, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "nokey"}, []string{"zz"}); err == nil {
		t.Error("a key column that does not exist was accepted")
	}
	if _, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "missing"}, nil); err == nil {
		t.Error("a missing table was described")
	}
}

// TestZeroDates reads MySQL's zero dates (allowed when sql_mode has no
// NO_ZERO_DATE) as -infinity, and refuses a date with a zero month.
func TestZeroDates(t *testing.T) {
	src, root := testDB(t,
		"SET SESSION sql_mode = ''",
		"CREATE TABLE z (id int PRIMARY KEY, d date, dt datetime(3), ts timestamp NULL)",
		"INSERT INTO z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')",
	)
	tbl, err := src.Describe(context.Background(), change.TableID{Schema: src.Database(), Name: "z"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := readAll(t, src, tbl)
	for i, v := range rows[0][1:] {
		if v.Text != "-infinity" {
			t.Errorf("column %s: %q, want -infinity", tbl.Columns[i+1].Name, v.Text)
		}
	}
	exec(t, root, "INSERT INTO z VALUES (2, '2020-00-15', NULL, NULL)")
	r, _ := newRowReader(tbl)
	if _, err := r.row([]any{int64(2), "2020-00-15", nil, nil}); err == nil || !strings.Contains(err.Error(), "NO_ZERO_IN_DATE") {
		t.Errorf("a date with a zero month: %v, want an error naming NO_ZERO_IN_DATE", err)
	}
}

func TestParseDSN(t *testing.T) {
	d, err := parseDSN("mysql://u%40x:p%3Aw@db.example:3307/sh%60op")
	if err != nil || d.User != "u@x" || d.Password != "p:w" || d.Host != "db.example:3307" || d.Database != "sh`op" {
		t.Errorf("parseDSN = %+v, %v", d, err)
	}
	if d, _ := parseDSN("mysql://u@h/db"); d.Host != "h:3306" {
		t.Errorf("default port: %+v", d)
	}
	if strings.Contains(d.String(), "p:w") {
		t.Errorf("String shows the password: %s", d)
	}
	for _, bad := range []string{"u:p@tcp(h:3306)/db", "postgres://u@h/db", "mysql://h/db", "mysql://u@h:3306/", "mysql://u@h/db?x=1", "mysql://u@h:99999/db"} {
		if _, err := parseDSN(bad); err == nil {
			t.Errorf("parseDSN(%q) accepted", bad)
		}
	}
}

// TestCancelAbandonsStatement: a context that ends while a statement runs
// closes its connection (go-mysql's client takes no context), and the
// source goes on working with a new one.
func TestCancelAbandonsStatement(t *testing.T) {
	src, _ := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := src.with(ctx, func(c *client.Conn) error {
		_, err := c.Execute("SELECT SLEEP(20)")
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 10*time.Second {
		t.Fatalf("with returned %v after %v, want the deadline within seconds", err, time.Since(began))
	}
	if _, err := src.ListTables(context.Background()); err != nil {
		t.Fatalf("the source after a cancelled statement: %v", err)
	}
}
