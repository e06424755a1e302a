package pg

import (
	"context"
	"fmt"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// TestChunkShapeCollations: a chunk's shape, read with the database's
// default collation given (read once per source), names each column's
// collation and byte order as Describe does, which finds the default in
// the catalog each time: in a database of the server's default locale,
// one whose locale has a twin in pg_collation (C.utf8: the default is
// named after it) and an ICU one (not bytewise).
func TestChunkShapeCollations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, admin := testDB(t, "SELECT 1")
	for _, tc := range []struct {
		name, create string
		text         change.Column // the default-collated column as Describe has it
	}{
		{name: "server default"},
		{name: "twin", create: "LOCALE 'C.utf8'", text: change.Column{Collation: "C.utf8", ByteOrder: true}},
		{name: "icu", create: "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'", text: change.Column{Collation: "default", ByteOrder: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fmt.Sprintf("coll%d", dbSeq.Add(1))
			if _, err := admin.Exec(ctx, "CREATE DATABASE "+db+" TEMPLATE template0 "+tc.create); err != nil {
				t.Fatal(err)
			}
			dsn := server.DSN(db)
			src := openSource(t, dsn, ReadTimeouts{})
			conn, err := src.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = conn.Exec(ctx, `CREATE TABLE c (id int PRIMARY KEY, a text, b text COLLATE "C",
				p varchar(5) COLLATE "POSIX", u text COLLATE "ucs_basic"); INSERT INTO c VALUES (1, 'x', 'y', 'z', 'w')`)
			conn.Release()
			if err != nil {
				t.Fatal(err)
			}
			id := change.TableID{Schema: "public", Name: "c"}
			described, err := src.Describe(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			chunk, err := src.ReadChunk(ctx, described, ReadOptions{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range described.Columns {
				got := chunk.Table.Columns[i]
				if got.Collation != c.Collation || got.ByteOrder != c.ByteOrder {
					t.Errorf("column %s: the chunk's shape has collation %q (byte order %v), Describe %q (%v)", c.Name, got.Collation, got.ByteOrder, c.Collation, c.ByteOrder)
				}
			}
			if a := described.Columns[1]; tc.create != "" && (a.Collation != tc.text.Collation || a.ByteOrder != tc.text.ByteOrder) {
				t.Errorf("column a: collation %q (byte order %v), want %q (%v)", a.Collation, a.ByteOrder, tc.text.Collation, tc.text.ByteOrder)
			}
		})
	}
}
