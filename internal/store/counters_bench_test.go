package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// BenchmarkAddCounters records the counters of a destination commit that
// touched 50 tables: one call a table (as the stream did) against one
// call for all (AddTablesCounters), in a SQLite and a PostgreSQL store.
// The figure is per commit.
func BenchmarkAddCounters(b *testing.B) {
	const tables = 50
	cs := make([]store.TableCounters, tables)
	for i := range cs {
		cs[i] = store.TableCounters{Schema: "public", Table: fmt.Sprintf("t%02d", i), Counters: store.Counters{EventsProcessed: 1, EventsLoaded: 1, BytesProcessed: 100, BytesLoaded: 100}}
	}
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect+"/each", func(b *testing.B) {
			s := benchStoreAt(b, benchURL(b, dialect))
			for b.Loop() {
				for _, c := range cs {
					if err := s.AddCounters(b.Context(), "bench", c.Schema, c.Table, time.Now(), c.Counters); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(dialect+"/together", func(b *testing.B) {
			s := benchStoreAt(b, benchURL(b, dialect))
			for b.Loop() {
				if err := s.AddTablesCounters(b.Context(), "bench", time.Now(), cs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
