package expr

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, whatever the host has
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func testEnv(t testing.TB) Env {
	ber := mustLoc(t, "Europe/Berlin")
	return Env{
		BizTime:   time.Date(2025, 1, 31, 0, 0, 0, 0, ber),
		BizEnd:    time.Date(2025, 2, 3, 0, 0, 0, 0, ber),
		Scheduled: time.Date(2025, 2, 1, 1, 30, 0, 0, ber),
		Params:    map[string]string{"region": "eu", "my-param": "x", "dotted.name": "d", "bizdate": "shadowed"},
		Outputs: map[string]map[string]string{
			"load_orders":      {"rows": "42", "table": "orders_20250131"},
			"shop.load_orders": {"rows": "42", "table": "orders_20250131"},
		},
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ tmpl, want string }{
		{"", ""},
		{"no references", "no references"},
		{"${bizdate}", "20250131"},
		{"${bizdate-1}", "20250130"},
		{"${bizdate+7}", "20250207"},
		{"${bizdate+1d}", "20250201"},
		{"${bizdate-2w}", "20250117"},
		{"${bizdate+1w:yyyy-MM-dd}", "2025-02-07"},
		{"${bizdate-000001}", "20250130"},
		{"${bizdate+0}", "20250131"},
		{"${bizdate-365}", "20240201"},
		{"${bizdate:yyyy-MM-dd}", "2025-01-31"},
		{"${bizdate:yy/MM/dd}", "25/01/31"},
		{"${bizdate:ddd}", "31d"},
		{"${bizdate:y-M-d}", "y-M-d"},
		{"${bizdate:HH:mm}", "00:00"},
		{"${bizdate+1mon:yyyy-MM-01}", "2025-02-01"},
		// Months keep the day within the month.
		{"${bizdate+1mon}", "20250228"},
		{"${bizdate+2mon}", "20250331"},
		{"${bizdate+3mon}", "20250430"},
		{"${bizdate-1mon}", "20241231"},
		{"${bizdate-2mon}", "20241130"},
		{"${bizdate+13mon}", "20260228"},
		{"${bizdate-25mon}", "20221231"},
		{"${bizdate+1y}", "20260131"},
		{"${bizdate-3y:yyyy}", "2022"},
		{"${biztime}", "2025-01-31 00:00:00"},
		{"${biztime-1h:yyyyMMddHH}", "2025013023"},
		{"${biztime+90min:HH:mm}", "01:30"},
		{"${biztime-1min:yyyy-MM-dd HH:mm:ss}", "2025-01-30 23:59:00"},
		{"${cyctime}", "2025-02-01 01:30:00"},
		{"${cyctime:HH}", "01"},
		{"${cyctime-1d:yyyyMMdd}", "20250131"},
		{"${bizdate_end}", "20250203"},
		{"${biztime_end:yyyy-MM-dd}", "2025-02-03"},
		{"${param.region}", "eu"},
		{"${region}", "eu"},
		{"${param.my-param}", "x"},
		{"${param.dotted.name}", "d"},
		// Time names win; a parameter of that name needs param.
		{"${param.bizdate}", "shadowed"},
		{"${outputs.load_orders.rows}", "42"},
		{"${outputs.shop.load_orders.table}", "orders_20250131"},
		{"$${bizdate}", "${bizdate}"},
		{"$${", "${"},
		{"$$${bizdate}", "$${bizdate}"},
		{"price $5, $$, ${region}$", "price $5, $$, eu$"},
		{"}{ } $ {bizdate}", "}{ } $ {bizdate}"},
		{"select * from t where dt = '${bizdate}' and hr = ${biztime:HH} -- ${region}",
			"select * from t where dt = '20250131' and hr = 00 -- eu"},
		{"${bizdate}${bizdate-1}", "2025013120250130"},
	} {
		got, err := Render(tc.tmpl, testEnv(t))
		if err != nil || got != tc.want {
			t.Errorf("Render(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
}

func TestRenderCalendar(t *testing.T) {
	t.Parallel()
	ber := mustLoc(t, "Europe/Berlin")
	for _, tc := range []struct {
		biz        time.Time
		tmpl, want string
	}{
		// Leap years.
		{time.Date(2024, 1, 31, 0, 0, 0, 0, ber), "${bizdate+1mon}", "20240229"},
		{time.Date(2024, 2, 29, 0, 0, 0, 0, ber), "${bizdate+1y}", "20250228"},
		{time.Date(2024, 2, 29, 0, 0, 0, 0, ber), "${bizdate-4y}", "20200229"},
		{time.Date(2024, 2, 29, 0, 0, 0, 0, ber), "${bizdate+1}", "20240301"},
		{time.Date(2024, 3, 1, 0, 0, 0, 0, ber), "${bizdate-1}", "20240229"},
		{time.Date(2025, 3, 1, 0, 0, 0, 0, ber), "${bizdate-1}", "20250228"},
		{time.Date(2100, 3, 1, 0, 0, 0, 0, ber), "${bizdate-1}", "21000228"},
		{time.Date(2000, 3, 31, 0, 0, 0, 0, ber), "${bizdate-1mon}", "20000229"},
		{time.Date(2025, 3, 31, 0, 0, 0, 0, ber), "${bizdate-1mon}", "20250228"},
		{time.Date(2025, 5, 31, 0, 0, 0, 0, ber), "${bizdate-1mon}", "20250430"},
		{time.Date(2025, 12, 31, 0, 0, 0, 0, ber), "${bizdate+1}", "20260101"},
		// Hour arithmetic is on the wall clock, as time.Date normalises
		// it. On 2025-03-30 Berlin goes from 02:00 CET to 03:00 CEST:
		// 01:00 + 1h is 02:00, which does not exist and becomes 03:00.
		{time.Date(2025, 3, 30, 1, 0, 0, 0, ber), "${biztime+1h}", "2025-03-30 03:00:00"},
		{time.Date(2025, 3, 30, 3, 0, 0, 0, ber), "${biztime-1h}", "2025-03-30 03:00:00"},
		{time.Date(2025, 3, 30, 3, 0, 0, 0, ber), "${biztime-2h}", "2025-03-30 01:00:00"},
		{time.Date(2025, 3, 30, 4, 0, 0, 0, ber), "${biztime-24h:yyyyMMddHH}", "2025032904"},
		{time.Date(2025, 3, 31, 0, 0, 0, 0, ber), "${biztime-1d}", "2025-03-30 00:00:00"},
		// On 2025-10-26 02:00–03:00 happens twice; both are 02 on the
		// wall clock, and an hour before either is 01:00 (CEST).
		{time.Date(2025, 10, 26, 0, 0, 0, 0, time.UTC).In(ber), "${biztime-1h:HH}", "01"},
		{time.Date(2025, 10, 26, 1, 0, 0, 0, time.UTC).In(ber), "${biztime:HH}", "02"},
		{time.Date(2025, 10, 26, 0, 0, 0, 0, time.UTC).In(ber), "${biztime:HH}", "02"},
		{time.Date(2025, 10, 26, 1, 0, 0, 0, time.UTC).In(ber), "${biztime-1h:HH zz}", "01 zz"},
		{time.Date(2025, 10, 26, 0, 0, 0, 0, time.UTC).In(ber), "${biztime+1h:HH}", "03"},
		// Far years print in full.
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), "${bizdate+1}", "100000101"},
		{time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), "${bizdate-999999y:yy}", "26"},
	} {
		env := Env{BizTime: tc.biz}
		got, err := Render(tc.tmpl, env)
		if err != nil || got != tc.want {
			t.Errorf("Render(%q) at %v = %q, %v; want %q", tc.tmpl, tc.biz, got, err, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	params := []string{"region", "my-param"}
	upstream := []string{"load_orders", "shop.load_orders"}
	for _, tc := range []struct {
		tmpl   string
		offset int
		want   string
	}{
		{"echo ${bizdate", 5, `unterminated "${": close it with "}", or write "$${" for a literal "${"`},
		{"${bizdate} ${", 11, `unterminated "${"`},
		{"x ${bizdate-1x}", 13, `unknown unit "x": use y (years), mon (months), w (weeks), d (days, the default), h (hours) or min (minutes)`},
		{"${bizdate-1m}", 11, `unknown unit "m"`},
		{"${biztime+1hour}", 11, `unknown unit "hour"`},
		{"${bizdate-}", 9, `"-" needs a number of 1 to 6 digits, e.g. ${bizdate-1} or ${bizdate-2h}`},
		{"${bizdate+h}", 9, `"+" needs a number`},
		{"${bizdate-1234567}", 9, `needs a number of 1 to 6 digits`},
		{"${bizdate*2}", 9, `unexpected "*2" after bizdate`},
		{"${bizdate-1:}", 11, `empty format after ":"`},
		{"${bizdate1}", 0, `unknown parameter "bizdate1"`},
		{"a ${}", 2, "empty reference: write a time such as ${bizdate}"},
		{"${ bizdate }", 0, "no spaces inside ${…}"},
		{"${a${b}}", 2, `unknown reference "a${b"`},
		{"${param.}", 2, `parameter name ""`},
		{"${param.a b}", 0, "no spaces"},
		{"${region}-${zone}", 10, `unknown parameter "zone": the task declares parameters region, my-param`},
		{"${param.zone}", 0, `unknown parameter "zone"`},
		{"${outputs.rows}", 2, "write ${outputs.TASK.NAME}"},
		{"${outputs.load_orders.}", 2, "write ${outputs.TASK.NAME}"},
		{"${outputs..rows}", 2, "write ${outputs.TASK.NAME}"},
		{"${outputs.a:b.rows}", 2, "with letters, digits"},
		{"${outputs.other.rows}", 0, `"other" is not an upstream task: the task declares upstream tasks load_orders, shop.load_orders`},
		{"${outputs.shop.other.rows}", 0, `"shop.other" is not an upstream task`},
		{"${a-b}", 2, `unknown reference "a-b"`},
	} {
		err := Validate(tc.tmpl, params, upstream)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Validate(%q) = %v, want an *Error", tc.tmpl, err)
			continue
		}
		if !strings.Contains(e.Msg, tc.want) {
			t.Errorf("Validate(%q) = %q, want it to say %q", tc.tmpl, err, tc.want)
		}
		if e.Offset != tc.offset {
			t.Errorf("Validate(%q) error at byte %d, want %d: %v", tc.tmpl, e.Offset, tc.offset, err)
		}
		if !strings.Contains(err.Error(), "at byte ") {
			t.Errorf("Validate(%q) error %q does not say where", tc.tmpl, err)
		}
		// Render refuses the same templates.
		env := testEnv(t)
		env.Params = map[string]string{"region": "eu", "my-param": "x"}
		env.Outputs = map[string]map[string]string{"load_orders": {"rows": "1"}, "shop.load_orders": {"rows": "1"}}
		if _, err := Render(tc.tmpl, env); err == nil {
			t.Errorf("Render(%q) succeeded; Validate said %v", tc.tmpl, e)
		}
	}
}

func TestRenderMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tmpl string
		env  Env
		want string
	}{
		{"${cyctime}", Env{BizTime: time.Now()}, "no cyctime to render"},
		{"${bizdate}", Env{}, "no bizdate to render"},
		{"${outputs.up.missing}", Env{Outputs: map[string]map[string]string{"up": {}}}, `upstream task "up" has no output "missing"`},
		{"${outputs.up.x}", Env{}, `"up" is not an upstream task`},
		{"${p}", Env{}, `unknown parameter "p"`},
	} {
		if _, err := Render(tc.tmpl, tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Render(%q) = %v, want an error saying %q", tc.tmpl, err, tc.want)
		}
	}
	// A single instance's end falls back to its business time.
	got, err := Render("${bizdate_end}", Env{BizTime: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)})
	if err != nil || got != "20250102" {
		t.Errorf("Render(bizdate_end) = %q, %v", got, err)
	}
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{
		"", "plain", "$${x}", "${bizdate} ${biztime-1h:yyyyMMddHH} ${bizdate+1mon:yyyy-MM-01} ${cyctime:HH}",
		"${bizdate_end} ${biztime_end}", "${region} ${param.region}", "${outputs.load_orders.rows} ${outputs.shop.load_orders.rows}",
	} {
		if err := Validate(tmpl, []string{"region"}, []string{"load_orders", "shop.load_orders"}); err != nil {
			t.Errorf("Validate(%q): %v", tmpl, err)
		}
	}
}

// A time format holds only tokens, letters, digits and SafeFormatChars:
// anything else could mean something to a shell or to SQL.
func TestFormatRefusesUnsafeCharacters(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{"${bizdate:yyyy;touch x}", "${biztime:HH'mm}", "${bizdate:yyyy$MM}", "${cyctime:HH\"}", "${bizdate:yyyy`}", "${bizdate:dd\n}", "${bizdate:é}"} {
		err := Validate(tmpl, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "cannot be in a format") {
			t.Errorf("Validate(%q) = %v, want a format error", tmpl, err)
		}
	}
	if err := Validate("${biztime:yyyy-MM-dd HH:mm:ss} ${bizdate:yy/MM/dd,d.M.y+T_1}", nil, nil); err != nil {
		t.Errorf("safe formats refused: %v", err)
	}
}

// Parse hands out literal text as the shell will see it and each reference
// with its kind.
func TestParse(t *testing.T) {
	t.Parallel()
	parts, err := Parse(`a $${x} ${bizdate} "${outputs.up.v}" ${param.p}${q}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range parts {
		if p.Ref == nil {
			got = append(got, "lit:"+p.Lit)
			continue
		}
		got = append(got, fmt.Sprintf("ref:%d:%s:%s:%s", p.Ref.Kind, p.Ref.Task, p.Ref.Name, p.Ref.Text))
	}
	want := []string{"lit:a ${x} ", "ref:0::bizdate:${bizdate}", `lit: "`, "ref:2:up:v:${outputs.up.v}", `lit:" `, "ref:1::p:${param.p}", "ref:1::q:${q}"}
	if !slices.Equal(got, want) {
		t.Errorf("parts = %q\nwant    %q", got, want)
	}
}
