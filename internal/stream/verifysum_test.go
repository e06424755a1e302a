package stream

import (
	"context"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
)

// intOrder orders modelTable's integer keys, as the source would.
type intOrder struct{}

func (intOrder) WantPosition(change.LSN) {}

func (intOrder) InRange(_ context.Context, _ *change.Table, keys []change.Key, low, high change.Key) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = (low == nil || keyInt(k) > keyInt(low)) && (high == nil || keyInt(k) <= keyInt(high))
	}
	return out, nil
}

// TestWindowTouches: a summed range is settled by its sums only when no
// change of its window falls in it — a row written, deleted, or moved into
// or out of it, or a truncate.
func TestWindowTouches(t *testing.T) {
	a := &applier{src: intOrder{}}
	row := func(id int) change.Row { return change.Row{key(id)[0], change.Text("v"), change.Text("big")} }
	for _, tc := range []struct {
		name   string
		window []change.Change
		want   int
	}{
		{"none", nil, 0},
		{"outside", []change.Change{{Kind: change.Update, Row: row(5)}, {Kind: change.Delete, OldKey: key(30)}}, 0},
		{"update inside", []change.Change{{Kind: change.Update, Row: row(15)}}, 1},
		{"insert at the high bound", []change.Change{{Kind: change.Insert, Row: row(20)}}, 1},
		{"insert at the low bound", []change.Change{{Kind: change.Insert, Row: row(10)}}, 0},
		{"delete inside", []change.Change{{Kind: change.Delete, OldKey: key(11)}}, 1},
		{"key moved in", []change.Change{{Kind: change.Update, OldKey: key(3), Row: row(12)}}, 1},
		{"key moved out", []change.Change{{Kind: change.Update, OldKey: key(12), Row: row(40)}}, 1},
		{"truncate", []change.Change{{Kind: change.Truncate}}, 1},
	} {
		got, err := a.windowTouches(context.Background(), modelTable, tc.window, key(10), key(20))
		if err != nil || got != tc.want {
			t.Errorf("%s: %d changes in (10, 20], err %v; want %d", tc.name, got, err, tc.want)
		}
	}
}
