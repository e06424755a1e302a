package store_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// TestPackedSeesEveryUpdate: a row changed by hand, outside the store (an
// operator's UPDATE in psql or sqlite3), is read whole by a restart's
// packed read, as listing the rows shows it; a dependency removed by hand
// drops the packed value.
func TestPackedSeesEveryUpdate(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(*testing.T) string
	}{{"sqlite", sqliteURL}, {"postgres", postgresURL}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s := opener(tc.url)(t)
			day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
			insts := make([]store.BatchInstance, 4)
			for i := range insts {
				d := day.AddDate(0, 0, i)
				insts[i] = store.BatchInstance{Task: "hand", BizTime: d, BizEnd: d.AddDate(0, 0, 1), Scheduled: d}
			}
			b := &store.BatchBackfill{Name: "hand", Task: "hand", StartedBy: "cli", RunAt: day}
			if err := s.CreateBatchBackfill(ctx, b, insts, [][]int{nil, {0}, {1}, {2}}); err != nil {
				t.Fatal(err)
			}
			q := store.Rebind(s.Dialect(), `UPDATE "batch_instances" SET "state" = 'stopped', "reason" = 'by hand' WHERE "id" = ?`)
			if err := store.Exec(ctx, s, q, insts[2].ID); err != nil {
				t.Fatal(err)
			}
			rows, err := s.ListBatchInstances(ctx, store.BatchInstanceFilter{BackfillID: b.ID})
			if err != nil {
				t.Fatal(err)
			}
			if rows[2].State != store.InstanceStopped {
				t.Fatalf("listed %+v", rows[2])
			}
			var got []store.BatchInstance
			ok, err := s.ReadBatchBackfillInstances(ctx, b.ID, 3, func(page []store.BatchInstance) error {
				got = append(got, page...)
				return nil
			})
			if err != nil || !ok {
				t.Fatalf("packed read: ok=%v, %v", ok, err)
			}
			if !reflect.DeepEqual(got, rows) {
				t.Errorf("packed read =\n%+v\nwant (as listed)\n%+v", got, rows)
			}
			// A row's task renamed by hand: the value disagrees with the rows.
			q = store.Rebind(s.Dialect(), `UPDATE "batch_instances" SET "task" = 'renamed' WHERE "id" = ?`)
			if err := store.Exec(ctx, s, q, insts[1].ID); err != nil {
				t.Fatal(err)
			}
			_, err = s.ReadBatchBackfillInstances(ctx, b.ID, 3, func([]store.BatchInstance) error { return nil })
			if !errors.Is(err, store.ErrPackedDamaged) {
				t.Errorf("packed read after a task was renamed: %v, want ErrPackedDamaged", err)
			}
			// A dependency removed by hand: the packed value is dropped,
			// and the rows are what a restart reads.
			q = store.Rebind(s.Dialect(), `DELETE FROM "batch_instance_deps" WHERE "instance_id" = ?`)
			if err := store.Exec(ctx, s, q, insts[3].ID); err != nil {
				t.Fatal(err)
			}
			ok, err = s.ReadBatchBackfillInstances(ctx, b.ID, 3, func([]store.BatchInstance) error { return nil })
			if err != nil || ok {
				t.Errorf("packed read after a dependency was removed: ok=%v, %v; want no packed value", ok, err)
			}
		})
	}
}
