package dag_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/batch/dag"
)

func task(id string, upstream ...string) dag.Task {
	name := id
	if i := strings.IndexByte(id, '.'); i >= 0 {
		name = id[i+1:]
	}
	return dag.Task{ID: id, Name: name, Project: strings.SplitN(id, ".", 2)[0], Upstream: upstream}
}

func ids(ts []*dag.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func mustNew(t *testing.T, tasks ...dag.Task) *dag.Graph {
	t.Helper()
	g, err := dag.New(tasks)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []dag.Task
		want  []string // substrings of the error
	}{
		{"duplicate ID", []dag.Task{task("p.a"), task("p.a")}, []string{`"p.a" is defined twice`}},
		{"unknown upstream", []dag.Task{task("p.load"), task("p.b", "p.laod")}, []string{`upstream "p.laod" is not a task`, `did you mean "p.load"`}},
		{"self loop", []dag.Task{task("p.a", "p.a")}, []string{`"p.a" lists itself upstream`, "self_dependent"}},
		{"cycle", []dag.Task{task("p.x"), task("p.a", "p.c", "p.x"), task("p.b", "p.a"), task("p.c", "p.b"), task("p.d", "p.c")},
			[]string{"cycle", "p.a → p.b → p.c → p.a"}},
		{"no ID", []dag.Task{{Name: "n"}}, []string{"has no ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dag.New(tt.tasks)
			if err == nil {
				t.Fatal("New accepted the graph")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTopologicalOrder(t *testing.T) {
	t.Parallel()
	// Declared in an order that is not topological; ties broken by ID.
	g := mustNew(t,
		task("p.d", "p.b", "p.c"),
		task("p.c", "p.a"),
		task("p.b", "p.a", "p.a"), // a repeated upstream counts once
		task("p.z"),
		task("p.a"),
	)
	if got, want := ids(g.Tasks()), []string{"p.a", "p.b", "p.c", "p.d", "p.z"}; !slices.Equal(got, want) {
		t.Fatalf("Tasks() = %v, want %v", got, want)
	}
	if got := g.Upstream("p.b"); !slices.Equal(got, []string{"p.a"}) {
		t.Errorf("Upstream(p.b) = %v", got)
	}
	if got := g.Downstream("p.a"); !slices.Equal(got, []string{"p.b", "p.c"}) {
		t.Errorf("Downstream(p.a) = %v", got)
	}
	for i := range g.Len() {
		for _, u := range g.UpstreamAt(i) {
			if u >= i {
				t.Errorf("upstream position %d of %d is not before it", u, i)
			}
		}
	}
	// The graph keeps its own copy.
	tasks := []dag.Task{task("p.a"), task("p.b", "p.a")}
	g2 := mustNew(t, tasks...)
	tasks[1].Upstream[0] = "p.x"
	if tb, _ := g2.Task("p.b"); tb.Upstream[0] != "p.a" {
		t.Error("New did not copy Upstream")
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	g := mustNew(t, task("sales.load"), task("hr.load"), task("sales.orders", "sales.load"))
	tests := []struct {
		in      string
		wantID  string
		wantErr []string
	}{
		{in: "sales.load", wantID: "sales.load"},
		{in: "orders", wantID: "sales.orders"},
		{in: "load", wantErr: []string{`"load" is ambiguous`, "hr.load, sales.load"}},
		{in: "ordres", wantErr: []string{`no task has ID or name "ordres"`, `did you mean "orders"`}},
		{in: "zzzzzzzzzz", wantErr: []string{`no task has ID or name "zzzzzzzzzz"`}},
	}
	for _, tt := range tests {
		got, err := g.Lookup(tt.in)
		if tt.wantErr != nil {
			if err == nil {
				t.Errorf("Lookup(%q) = %s, want an error", tt.in, got.ID)
				continue
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Lookup(%q) error %q does not contain %q", tt.in, err, w)
				}
			}
			continue
		}
		if err != nil || got.ID != tt.wantID {
			t.Errorf("Lookup(%q) = %v, %v; want %s", tt.in, got, err, tt.wantID)
		}
	}
	if _, ok := g.Task("load"); ok {
		t.Error("Task finds by name; it takes IDs only")
	}
}

func TestLevels(t *testing.T) {
	t.Parallel()
	// a → b → c → d, a → d, x → c
	g := mustNew(t, task("p.a"), task("p.b", "p.a"), task("p.c", "p.b", "p.x"), task("p.d", "p.c", "p.a"), task("p.x"))
	tests := []struct {
		name   string
		got    []string
		expect []string
	}{
		{"descendants 0", g.Descendants("p.a", 0), nil},
		{"descendants 1", g.Descendants("p.a", 1), []string{"p.b", "p.d"}},
		{"descendants 2", g.Descendants("p.a", 2), []string{"p.b", "p.c", "p.d"}},
		{"descendants all", g.Descendants("p.a", dag.AllLevels), []string{"p.b", "p.c", "p.d"}},
		{"ancestors 1", g.Ancestors("p.d", 1), []string{"p.a", "p.c"}},
		{"ancestors 2", g.Ancestors("p.d", 2), []string{"p.a", "p.b", "p.x", "p.c"}},
		{"ancestors of root", g.Ancestors("p.a", dag.AllLevels), nil},
		{"unknown", g.Descendants("p.nope", 1), nil},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.expect) {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.expect)
		}
	}
}
