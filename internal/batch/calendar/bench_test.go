package calendar

import "testing"

// The planner calls these about a million times per plan.

func BenchmarkCyclesOn(b *testing.B) {
	for _, spec := range []string{"daily 01:30", "monthly 1,15,L", "hourly", "every 15m", "cron 0 3 * * *"} {
		s := mustParse(b, spec, "Europe/Berlin")
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			d := Date{2025, 1, 1}
			for i := 0; b.Loop(); i++ {
				_ = s.CyclesOn(d.AddDays(i % 730))
			}
		})
	}
}

func BenchmarkHasDate(b *testing.B) {
	for _, spec := range []string{"daily", "weekly mon,thu", "monthly 1,15,L", "hourly", "cron 0 3 * * *"} {
		s := mustParse(b, spec, "Europe/Berlin")
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			d := Date{2025, 1, 1}
			for i := 0; b.Loop(); i++ {
				_ = s.HasDate(d.AddDays(i % 730))
			}
		})
	}
}

func BenchmarkScheduled(b *testing.B) {
	for _, spec := range []string{"daily 01:30", "hourly", "cron 0 3 * * *"} {
		s := mustParse(b, spec, "Europe/Berlin")
		biz := (Date{2025, 1, 1}).Midnight(s.Location)
		b.Run(spec, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Scheduled(biz)
			}
		})
	}
}
