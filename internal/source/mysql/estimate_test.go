package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

func TestEstimateTable(t *testing.T) {
	src, root := testDB(t, "CREATE TABLE e (id int PRIMARY KEY)")
	for i := range 5 {
		exec(t, root, fmt.Sprintf("INSERT INTO e VALUES (%d)", i))
	}
	size, err := src.EstimateTable(context.Background(), change.TableID{Schema: src.Database(), Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if size.Rows != 5 || !size.Exact || size.Bytes <= 0 {
		t.Errorf("size = %+v, want 5 exact rows and some bytes", size)
	}
	if _, err := src.EstimateTable(context.Background(), change.TableID{Schema: src.Database(), Name: "missing"}); err == nil {
		t.Error("a missing table was sized")
	}
}

// TestInRangeAgreesWithReadChunk: for every pair of bounds taken from the
// table's keys (text under a case- and accent-insensitive, a binary and a
// latin1 collation, and a second column),
// InRange says a key is in (low, high] exactly when ReadChunk with those
// bounds returns it.
func TestInRangeAgreesWithReadChunk(t *testing.T) {
	for _, collation := range []string{"utf8mb4_general_ci", "utf8mb4_bin", "latin1_german2_ci"} {
		t.Run(collation, func(t *testing.T) { testInRange(t, collation) })
	}
}

func testInRange(t *testing.T, collation string) {
	cs, _, _ := strings.Cut(collation, "_")
	src, root := testDB(t, "CREATE TABLE r (s varchar(10) CHARACTER SET "+cs+" COLLATE "+collation+", n int, PRIMARY KEY (s, n))")
	exec(t, root, "INSERT INTO r VALUES ('a', 1), ('B', 1), ('b ', 2), ('C', 0), ('é', 3), ('E', 4), ('z', 1), ('ä', 5)")
	ctx := context.Background()
	tbl, err := src.Describe(ctx, change.TableID{Schema: src.Database(), Name: "r"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := src.ReadChunk(ctx, tbl, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []change.Key
	for _, row := range all.Rows {
		keys = append(keys, tbl.RowKey(row))
	}
	probes := append(slices.Clone(keys), change.Key{change.Text("b"), change.Text("1")}, change.Key{change.Text("e"), change.Text("3")})
	bounds := append([]change.Key{nil}, probes...)
	for _, low := range bounds {
		for _, high := range bounds {
			c, err := src.ReadChunk(ctx, tbl, ReadOptions{After: low, Upto: high})
			if err != nil {
				t.Fatal(err)
			}
			read := map[string]bool{}
			for _, row := range c.Rows {
				read[tbl.RowKey(row).Encode()] = true
			}
			in, err := src.InRange(ctx, tbl, keys, low, high)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				if in[i] != read[k.Encode()] {
					t.Errorf("key %v in (%v, %v]: InRange %v, ReadChunk %v", k, low, high, in[i], read[k.Encode()])
				}
			}
		}
	}
}
