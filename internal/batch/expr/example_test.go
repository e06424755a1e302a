package expr_test

import (
	"fmt"
	"time"

	"github.com/tidemark/tidemark/internal/batch/expr"
)

func Example() {
	loc, _ := time.LoadLocation("Europe/Berlin")
	tmpl := "load --day ${bizdate} --hour ${biztime-1h:yyyyMMddHH} --month ${bizdate+1mon:yyyy-MM-01} " +
		"--region ${region} --rows ${outputs.extract.rows} --literal $${bizdate}"
	if err := expr.Validate(tmpl, []string{"region"}, []string{"shop.extract", "extract"}); err != nil {
		fmt.Println(err)
		return
	}
	out, err := expr.Render(tmpl, expr.Env{
		BizTime:   time.Date(2025, 1, 31, 0, 0, 0, 0, loc),
		Scheduled: time.Date(2025, 2, 1, 1, 30, 0, 0, loc),
		Params:    map[string]string{"region": "eu"},
		Outputs:   map[string]map[string]string{"extract": {"rows": "42"}, "shop.extract": {"rows": "42"}},
	})
	fmt.Println(out, err)

	fmt.Println(expr.Validate("${bizdate-1m}", nil, nil))
	// Output:
	// load --day 20250131 --hour 2025013023 --month 2025-02-01 --region eu --rows 42 --literal ${bizdate} <nil>
	// at byte 11, ${bizdate-1m}: unknown unit "m": use y (years), mon (months), w (weeks), d (days, the default), h (hours) or min (minutes)
}
