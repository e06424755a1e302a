package postgres

import (
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

func TestAlter(t *testing.T) {
	sinktest.RunAlter(t, func(t *testing.T) sink.Sink { return open(t, newDB(t)) })
}

// TestCheckAfterCreate: the check right after EnsureTable created a table
// from the same shape reads nothing (the shape fits what was created); the
// next check, or one with another shape, reads the table again and sees a
// column dropped by hand meanwhile.
func TestCheckAfterCreate(t *testing.T) {
	dsn := newDB(t)
	s := open(t, dsn)
	defer s.Close()
	tbl := &change.Table{ID: change.TableID{Schema: "public", Name: "fresh"}, Key: []int{0}, Columns: []change.Column{
		{Name: "id", Num: 1, Type: "integer", TypeOID: 23, BaseOID: 23, TypeMod: -1},
		{Name: "v", Num: 2, Type: "text", TypeOID: 25, BaseOID: 25, TypeMod: -1}}}
	if err := s.EnsureTable(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, dsn).Exec(t.Context(), `ALTER TABLE public.fresh DROP COLUMN v`); err != nil {
		t.Fatal(err)
	}
	c, err := s.CheckTable(t.Context(), tbl)
	if err != nil || !c.Exists || len(c.Steps) != 0 || len(c.Problems) != 0 {
		t.Fatalf("the check right after creating: %+v %v, want it to fit without reading", c, err)
	}
	c, err = s.CheckTable(t.Context(), tbl)
	if err != nil || len(c.Steps) != 1 || c.Steps[0].Kind != sink.AddColumn || c.Steps[0].Column.Name != "v" {
		t.Fatalf("the next check: %+v %v, want the dropped column to add", c, err)
	}
}
