package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestNoopSucceedsWithoutAllocating(t *testing.T) {
	// Not parallel: AllocsPerRun refuses to run beside other tests.
	ctx := context.Background()
	spec := Spec{Type: TypeNoop}
	var res Result
	allocs := testing.AllocsPerRun(100, func() { res = Run(ctx, spec, nil, nil) })
	if res.Err != nil || res.ExitCode != 0 || res.Outputs != nil {
		t.Fatalf("noop: %+v", res)
	}
	if allocs != 0 {
		t.Fatalf("noop allocates %v times per run", allocs)
	}
}

func TestUnknownType(t *testing.T) {
	t.Parallel()
	res := Run(context.Background(), Spec{Type: "python"}, nil, nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), `"python"`) || res.ExitCode != -1 {
		t.Fatalf("unknown type: %+v", res)
	}
}

func TestSQLWithoutConnection(t *testing.T) {
	t.Parallel()
	res := Run(context.Background(), Spec{Type: TypeSQL, Script: "SELECT 1"}, nil, nil)
	if res.Err == nil {
		t.Fatal("sql task without a connection succeeded")
	}
}

func ExampleRun() {
	log := NewLog(0)
	res := Run(context.Background(), Spec{
		Type:   TypeShell,
		Script: `echo "loaded $ROWS rows"; echo "rows=$ROWS" >> "$TIDEMARK_OUTPUT"`,
		Env:    []string{"ROWS=42"},
	}, log, nil)
	fmt.Print(log.String())
	fmt.Println(res.Err, res.ExitCode, res.Outputs)
	// Output:
	// loaded 42 rows
	// <nil> 0 map[rows:42]
}
