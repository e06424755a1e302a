package remote

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/batch/runner"
)

// TestAttemptCarriesNoSecret: a queued attempt names its connection and
// the daemon's variables it inherits, never their values; the node that
// runs it fills them in from its own, and refuses a connection it lacks.
func TestAttemptCarriesNoSecret(t *testing.T) {
	conn := runner.Connection{Name: "wh", Type: runner.ConnPostgres, DSN: "postgres://u:s3cret@db/wh"}
	spec := runner.Spec{Type: runner.TypeSQL, Script: "SELECT 1", Conn: &conn, Tag: "tidemark-i1-a1-00",
		Env: []string{"TIDEMARK_TASK=p.t"}, Timeout: time.Minute,
		Statements: []runner.Statement{{SQL: "SELECT $1", Args: []string{"x"}, Line: 2}}}
	data, err := Encode(spec, []string{"PGPASSFILE"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(data, "s3cret") || strings.Contains(data, "/home/") {
		t.Fatalf("queued attempt holds a secret: %s", data)
	}
	lookup := func(name string) (string, bool) {
		if name == "PGPASSFILE" {
			return "/home/t/.pgpass", true
		}
		return "", false
	}
	got, err := Decode(data, map[string]runner.Connection{"wh": conn}, lookup, "/work")
	if err != nil {
		t.Fatal(err)
	}
	if got.Conn == nil || got.Conn.DSN != conn.DSN || got.Dir != "/work" || got.Timeout != time.Minute ||
		!slices.Equal(got.Env, []string{"PGPASSFILE=/home/t/.pgpass", "TIDEMARK_TASK=p.t"}) ||
		len(got.Statements) != 1 || got.Statements[0].Args[0] != "x" {
		t.Errorf("decoded %+v", got)
	}
	if _, err := Decode(data, nil, lookup, ""); err == nil || !strings.Contains(err.Error(), `connection "wh" is not configured on this node`) {
		t.Errorf("decode without the connection: %v", err)
	}
}

// TestResult: an interrupted attempt reads as ErrInterrupted, a lapsed
// one as runner.ErrLapsed, a failure as its message, a success as no
// error.
func TestResult(t *testing.T) {
	if r := (Result{Interrupted: true, Err: "cancelled", Node: "a"}).RunnerResult(); r.Err == nil || !strings.Contains(r.Err.Error(), "node a stopped") {
		t.Errorf("interrupted: %v", r.Err)
	}
	lapsed := Result{Lapsed: true, Interrupted: true, Err: runner.ErrLapsed.Error() + ": its watchdog ended it", ExitCode: -1, Node: "a"}
	if r := lapsed.RunnerResult(); !errors.Is(r.Err, runner.ErrLapsed) || errors.Is(r.Err, ErrInterrupted) ||
		r.Err.Error() != runner.ErrLapsed.Error()+" on node a: its watchdog ended it" {
		t.Errorf("lapsed: %v", r.Err)
	}
	if r := (Result{Err: "exit status 3", ExitCode: 3}).RunnerResult(); r.Err == nil || r.Err.Error() != "exit status 3" || r.ExitCode != 3 {
		t.Errorf("failed: %+v", r)
	}
	if r := (Result{Outputs: map[string]string{"rows": "7"}}).RunnerResult(); r.Err != nil || r.Outputs["rows"] != "7" {
		t.Errorf("succeeded: %+v", r)
	}
}

// FuzzDecode: whatever the queue holds, decoding returns an error or a
// spec; it never panics.
func FuzzDecode(f *testing.F) {
	f.Add(`{"type":"shell","script":"echo","env":["A=1"],"inherit":["PATH"],"tag":"t"}`)
	f.Add(`{"type":"sql","conn":"wh","statements":[{"SQL":"SELECT 1","Args":null,"Line":1}]}`)
	f.Add(`{"error":"x","exit_code":-1,"interrupted":true}`)
	f.Fuzz(func(t *testing.T, data string) {
		_, _ = Decode(data, map[string]runner.Connection{"wh": {Name: "wh"}}, func(string) (string, bool) { return "v", true }, "")
		_, _ = DecodeResult(data)
	})
}
