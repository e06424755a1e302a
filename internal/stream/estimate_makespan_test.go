package stream

import "testing"

// TestMakespan: the estimate of several backfills is never shorter than the
// longest of them (a 5 s table beside small ones took 3 s in the estimate
// before) nor than their total shared by max_concurrent lanes.
func TestMakespan(t *testing.T) {
	for _, tc := range []struct {
		durations []float64
		lanes     int
		want      float64
	}{
		{[]float64{5, 1, 1, 1}, 2, 5},
		{[]float64{1, 1, 1, 1}, 2, 2},
		{[]float64{2, 2, 2}, 4, 2},
		{[]float64{3, 3, 3}, 1, 9},
		{nil, 2, 0},
		{[]float64{4}, 0, 4},
	} {
		if got := makespan(tc.durations, tc.lanes); got != tc.want {
			t.Errorf("makespan(%v, %d) = %v, want %v", tc.durations, tc.lanes, got, tc.want)
		}
	}
}
