package expr

import (
	"testing"
	"time"
)

// FuzzRender: Render and Validate never panic, and a template Validate
// accepts renders without error given every parameter and output it
// references (and Validate refuses what such an environment cannot render).
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "${bizdate}", "${bizdate-1}", "${biztime-1h:yyyyMMddHH}", "${bizdate+1mon:yyyy-MM-01}",
		"${cyctime:HH}", "${bizdate_end+999999y:yy}", "${param.a} ${b}", "${outputs.p.t.rows}",
		"$${bizdate}", "$$${", "${", "${}", "${bizdate-1m}", "${a${b}}", "x}${y", "${biztime:yyyy-MM-dd HH:mm:ss}",
		"${bizdate:yyyy;touch x}", "${bizdate-999999y:MM-yyyy}", "a${param.b}c$${d}",
	} {
		f.Add(s)
	}
	ber, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		// Collect what tmpl references, as far as it parses.
		env := Env{
			BizTime:   time.Date(2025, 3, 30, 2, 0, 0, 0, ber),
			BizEnd:    time.Date(2025, 10, 26, 2, 0, 0, 0, ber),
			Scheduled: time.Date(2024, 2, 29, 23, 59, 0, 0, ber),
			Params:    map[string]string{},
			Outputs:   map[string]map[string]string{},
		}
		var params, upstream []string
		_ = scan(tmpl, func(string) {}, func(r *ref) error {
			switch r.kind {
			case refParam:
				params = append(params, r.name)
				env.Params[r.name] = "v"
			case refOutput:
				upstream = append(upstream, r.task)
				if env.Outputs[r.task] == nil {
					env.Outputs[r.task] = map[string]string{}
				}
				env.Outputs[r.task][r.name] = "o"
			}
			return nil
		})
		// A calendar value is letters, digits and SafeFormatChars only.
		parts, _ := Parse(tmpl)
		for _, p := range parts {
			if p.Ref == nil || p.Ref.Free() {
				continue
			}
			v, err := p.Ref.Value(env)
			if err != nil {
				t.Fatalf("template %q: %s parsed but does not render: %v", tmpl, p.Ref.Text, err)
			}
			if i := unsafeFormatChar(v); i >= 0 {
				t.Fatalf("template %q: %s rendered %q, with %q", tmpl, p.Ref.Text, v, v[i:i+1])
			}
		}
		verr := Validate(tmpl, params, upstream)
		_, rerr := Render(tmpl, env)
		if (verr == nil) != (rerr == nil) {
			t.Fatalf("template %q: Validate says %v but Render says %v", tmpl, verr, rerr)
		}
		// Nothing declared: never a panic, and no looser than Validate.
		if Validate(tmpl, nil, nil) == nil {
			if _, err := Render(tmpl, Env{BizTime: env.BizTime, Scheduled: env.Scheduled}); err != nil {
				t.Fatalf("template %q: Validate accepts it with nothing declared, Render says %v", tmpl, err)
			}
		}
	})
}
