package plan_test

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/batch/plan"
)

// Three dates in two concurrency groups: Jan 11 and Jan 13 start together,
// Jan 12 starts when Jan 11 has finished.
func ExampleBuild() {
	daily, _ := calendar.Parse("daily", time.UTC)
	g, _ := dag.New([]dag.Task{
		{ID: "sales.orders", Name: "orders", Schedule: daily},
		{ID: "sales.report", Name: "report", Schedule: daily, Upstream: []string{"sales.orders"}},
	})
	p, err := plan.Build(plan.Input{
		Graph: g,
		Now:   time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		Request: plan.Request{
			Task:   "orders",
			Scope:  plan.Scope{Mode: plan.ScopeList, Downstream: 1},
			Dates:  plan.Dates{From: calendar.Date{Year: 2025, Month: 1, Day: 11}, To: calendar.Date{Year: 2025, Month: 1, Day: 13}},
			Groups: 2,
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Name, p.Groups)
	for _, in := range p.Instances {
		fmt.Printf("%d %s %s group %d step %d deps %v\n", in.Order, in.Task, in.Date, in.Group, in.Seq, in.Deps)
	}
	// Output:
	// orders_20250601_1 [[2025-01-11 2025-01-12] [2025-01-13]]
	// 0 sales.orders 2025-01-11 group 1 step 0 deps []
	// 1 sales.report 2025-01-11 group 1 step 0 deps [0]
	// 2 sales.orders 2025-01-13 group 2 step 0 deps []
	// 3 sales.report 2025-01-13 group 2 step 0 deps [2]
	// 4 sales.orders 2025-01-12 group 1 step 1 deps []
	// 5 sales.report 2025-01-12 group 1 step 1 deps [4]
}
