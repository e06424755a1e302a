package sinktest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/sink"
)

// ConnectFailure is a destination a server refuses: Change spoils a
// working one, Want are what the error and the doctor's detail say, Fix
// what the doctor's fix names.
type ConnectFailure struct {
	Name   string
	Change func(d *config.Destination)
	Want   []string
	Fix    string
}

// RunConnectFailures runs each case on a copy of good: open (the sink's
// Open, closing what it opened) must fail and doctor fail, as
// WantConnectFailure checks.
func RunConnectFailures(t *testing.T, good config.Destination, cases []ConnectFailure,
	open func(t *testing.T, d config.Destination) error, doctor func(t *testing.T, d config.Destination) sink.DoctorReport, secrets ...string) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			d := good
			c.Change(&d)
			WantConnectFailure(t, open(t, d), doctor(t, d), c.Want, c.Fix, secrets...)
		})
	}
}

// WantConnectFailure checks a destination's refusal to connect: Open's
// error err and the doctor's report r (one failed check) both say each of
// want, the doctor's fix names fix, and none of secrets shows in either.
func WantConnectFailure(t *testing.T, err error, r sink.DoctorReport, want []string, fix string, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Open succeeded")
	}
	if r.Known || len(r.Checks) != 1 || r.Checks[0].Status != check.Fail {
		t.Fatalf("doctor: %+v", r)
	}
	t.Logf("error: %v\nfix: %s", err, r.Checks[0].Fix)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) || !strings.Contains(r.Checks[0].Detail, w) {
			t.Errorf("%q or the doctor's %q does not say %q", err, r.Checks[0].Detail, w)
		}
	}
	if !strings.Contains(r.Checks[0].Fix, fix) {
		t.Errorf("the doctor's fix %q does not name %s", r.Checks[0].Fix, fix)
	}
	all := fmt.Sprintf("%v %+v", err, r)
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("a password shows: %s", all)
		}
	}
}
