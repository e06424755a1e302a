package plan_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/plan"
)

// Every numeric field of a request at both ends of its documented range
// and one past each (and at the extremes of int): the ends plan, the others
// are refused naming the field and the range.
func TestNumericRequestBounds(t *testing.T) {
	t.Parallel()
	g := newGraph(t, tk("p.x", "daily"), tk("p.y", "daily", "p.x"))
	day := rng("2025-01-01", "2025-01-01")
	feb := func(d plan.Dates) plan.Dates { d.From, d.To = date("2025-02-01"), date("2025-02-28"); return d }
	fields := []struct {
		field      string
		in, out    []int
		set        func(n int) plan.Request
		rangeWords string
	}{
		{"groups", []int{0, 1, plan.MaxGroups}, []int{-1, plan.MaxGroups + 1, math.MinInt, math.MaxInt},
			func(n int) plan.Request { return plan.Request{Task: "p.x", Dates: day, Groups: n} }, "1 to 12"},
		{"scope.downstream", []int{-1, 0, 1, plan.MaxLevels}, []int{-2, plan.MaxLevels + 1, math.MinInt, math.MaxInt},
			func(n int) plan.Request {
				return plan.Request{Task: "p.x", Dates: day, Scope: plan.Scope{Mode: plan.ScopeList, Downstream: n}}
			}, "1 to 10"},
		{"scope.upstream", []int{-1, 0, 1, plan.MaxLevels}, []int{-2, plan.MaxLevels + 1, math.MinInt, math.MaxInt},
			func(n int) plan.Request {
				return plan.Request{Task: "p.y", Dates: day, Scope: plan.Scope{Mode: plan.ScopeList, Upstream: n}}
			}, "1 to 10"},
		{"dates.weekdays", []int{0, 6}, []int{-1, 7, math.MinInt, math.MaxInt},
			func(n int) plan.Request {
				return plan.Request{Task: "p.x", Dates: feb(plan.Dates{Mode: plan.DatesCycle, Weekdays: []time.Weekday{time.Weekday(n)}})}
			}, "0 (Sunday) to 6"},
		{"dates.month_days", []int{calendar.MonthEnd, 1, 28}, []int{-2, 0, 32, math.MinInt, math.MaxInt},
			func(n int) plan.Request {
				return plan.Request{Task: "p.x", Dates: feb(plan.Dates{Mode: plan.DatesCycle, MonthDays: []int{n}})}
			}, "1 to 31"},
	}
	for _, f := range fields {
		for _, n := range f.in {
			if _, err := buildErr(g, f.set(n)); err != nil {
				t.Errorf("%s %d: %v", f.field, n, err)
			}
		}
		for _, n := range f.out {
			t.Run(fmt.Sprintf("%s %d", f.field, n), func(t *testing.T) {
				expectRefusal(t, refused(t, g, f.set(n)), f.field, f.rangeWords)
			})
		}
	}
}
