package stream

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/store"
)

// The numeric options of an initiate at both ends of their ranges, one
// past each, and values that are no number: 1e-12 rows per second was
// accepted and paced as no limit at all.
func TestOptionBounds(t *testing.T) {
	now := time.Now()
	for _, rate := range []float64{0, 1, 1e9, 12.5} {
		if err := (BackfillOptions{RowsPerSecond: rate}).Validate(now); err != nil {
			t.Errorf("rows_per_second %g: %v", rate, err)
		}
	}
	for _, rate := range []float64{-1, 1e-12, 0.999, math.SmallestNonzeroFloat64, 1e9 + 1, 1e308, math.MaxFloat64,
		math.NaN(), math.Inf(1), math.Inf(-1), -0.5} {
		err := (BackfillOptions{RowsPerSecond: rate}).Validate(now)
		if err == nil || !strings.Contains(err.Error(), "use a rate from 1 to 1000000000 rows per second, or 0") {
			t.Errorf("rows_per_second %g: %v", rate, err)
		}
	}
	for _, n := range []int64{0, 1, MaxSampleRows} {
		if err := (BackfillOptions{SampleRows: n}).Validate(now); err != nil {
			t.Errorf("sample_rows %d: %v", n, err)
		}
	}
	for _, n := range []int64{-1, MaxSampleRows + 1, math.MinInt64, math.MaxInt64} {
		err := (BackfillOptions{SampleRows: n}).Validate(now)
		if err == nil || !strings.Contains(err.Error(), "up to 1000000000000, or 0 for all") {
			t.Errorf("sample_rows %d: %v", n, err)
		}
	}
}

// A tiny rate stored before rates were bounded paces slowly rather than
// overflowing into no wait: throttle waits until its context ends.
func TestPaceOfATinyStoredRate(t *testing.T) {
	m := &backfills{}
	r := &run{rec: store.Backfill{Options: map[string]any{optRowsPerSecond: 1e-12}}}
	p := &pacer{start: time.Now(), rows: 10, rate: 1e-12}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if m.throttle(ctx, r, p) {
		t.Fatal("10 rows at 1e-12 rows per second went ahead at once")
	}
}
