package calendar_test

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/calendar"
)

func Example() {
	loc, _ := time.LoadLocation("Europe/Berlin")
	daily, _ := calendar.Parse("daily 01:30", loc)
	biz := calendar.Date{Year: 2025, Month: time.March, Day: 29}.Midnight(loc)
	fmt.Println(daily, "business time", biz.Format(time.DateTime), "due", daily.Scheduled(biz).Format(time.DateTime))

	// The day clocks go forward has 23 hourly cycles.
	hourly, _ := calendar.Parse("hourly", loc)
	fmt.Println(hourly, len(hourly.CyclesOn(calendar.Date{Year: 2025, Month: time.March, Day: 30})), "cycles")
	// Output:
	// daily 01:30 business time 2025-03-29 00:00:00 due 2025-03-30 01:30:00
	// hourly 23 cycles
}
