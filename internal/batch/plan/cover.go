package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/dag"
)

// cover returns the tasks the scope covers before exclusions and the
// paused filter.
func cover(g *dag.Graph, root int, s Scope) ([]bool, error) {
	cv := &coverage{g: g, root: root, values: s.Values, covered: make([]bool, g.Len())}
	cv.covered[root] = true
	switch s.Mode {
	case ScopeTask:
		return cv.covered, nil
	case ScopeList:
		cv.mark(g.DescendantsAt(root, s.Downstream))
		cv.mark(g.AncestorsAt(root, s.Upstream))
		return cv.covered, nil
	}
	cv.desc = g.DescendantsAt(root, dag.AllLevels)
	cv.isDesc = make([]bool, g.Len())
	for _, p := range cv.desc {
		cv.isDesc[p] = true
	}
	if mode := coverModes[s.Coverage]; mode != nil { // normalize checked the coverage
		if err := mode(cv); err != nil {
			return nil, err
		}
	}
	return cv.covered, nil
}

// coverage is what a mass-mode coverage works on: the graph from the
// start task root, the scope's values, and the tasks covered so far.
type coverage struct {
	g       *dag.Graph
	root    int
	values  []string
	covered []bool
	desc    []int  // every descendant of root, ascending
	isDesc  []bool // per position, whether it is in desc
}

// coverModes marks, per Coverage value, the tasks it covers, or refuses a
// value that does not fit.
var coverModes = map[string]func(*coverage) error{
	CoverProjects: func(cv *coverage) error {
		return cv.markDescendantsWhere(func(t *dag.Task) string { return t.Project }, "project")
	},
	CoverOutputs: func(cv *coverage) error {
		return cv.markDescendantsWhere(func(t *dag.Task) string { return t.Output }, "output")
	},
	CoverDescendants: func(cv *coverage) error {
		cv.mark(cv.desc)
		return nil
	},
	CoverAncestors: func(cv *coverage) error {
		cv.mark(cv.g.AncestorsAt(cv.root, dag.AllLevels))
		return nil
	},
	CoverAncestorsDescendants: func(cv *coverage) error {
		cv.mark(cv.desc)
		cv.mark(cv.g.AncestorsAt(cv.root, dag.AllLevels))
		return nil
	},
	CoverChildren:    (*coverage).coverChildren,
	CoverEndPoints:   func(cv *coverage) error { return cv.coverPaths(true) },
	CoverStartPoints: func(cv *coverage) error { return cv.coverPaths(false) },
	CoverNames:       (*coverage).coverNames,
	CoverIDs:         (*coverage).coverIDs,
}

func (cv *coverage) mark(pos []int) {
	for _, p := range pos {
		cv.covered[p] = true
	}
}

func (cv *coverage) field(k int) string { return fmt.Sprintf("scope.values[%d]", k) }

func (cv *coverage) rootID() string { return cv.g.At(cv.root).ID }

// markDescendantsWhere marks the descendants whose key is among the values,
// after checking that each value is some task's key.
func (cv *coverage) markDescendantsWhere(key func(*dag.Task) string, what string) error {
	want := make(map[string]bool, len(cv.values))
	for _, v := range cv.values {
		want[v] = true
	}
	exists := make(map[string]bool)
	for i := range cv.g.Len() {
		if k := key(cv.g.At(i)); want[k] {
			exists[k] = true
			if cv.isDesc[i] {
				cv.covered[i] = true
			}
		}
	}
	for k, v := range cv.values {
		if !exists[v] {
			return refuse(cv.field(k), "no task has %s %q", what, v)
		}
	}
	return nil
}

// coverChildren marks each named level-1 child of root and everything
// below it.
func (cv *coverage) coverChildren() error {
	g, rootID := cv.g, cv.rootID()
	children := g.DownstreamAt(cv.root)
	for k, v := range cv.values {
		var match []int
		for _, ch := range children {
			if t := g.At(ch); t.ID == v || t.Name == v {
				match = append(match, ch)
			}
		}
		switch len(match) {
		case 1:
			cv.covered[match[0]] = true
			cv.mark(g.DescendantsAt(match[0], dag.AllLevels))
		case 0:
			if _, err := g.Lookup(v); err != nil {
				return refuse(cv.field(k), "%v", err)
			}
			return refuse(cv.field(k), "%q is not a level-1 child of %s; its children are %s",
				v, rootID, listOr(g.Downstream(rootID), "none"))
		default:
			return refuse(cv.field(k), "several children of %s are named %q: %s; give the ID", rootID, v, strings.Join(ids(g, match), ", "))
		}
	}
	return nil
}

// coverPaths marks each point and every task on a path between it and
// root: below root for end points, above it for start points. When a point
// is not on the expected side, the two are backfilled alone.
func (cv *coverage) coverPaths(endPoints bool) error {
	for k, v := range cv.values {
		t, err := cv.g.Lookup(v)
		if err != nil {
			return refuse(cv.field(k), "%v", err)
		}
		p, _ := cv.g.Index(t.ID)
		cv.covered[p] = true
		upper, lower := cv.root, p
		if !endPoints {
			upper, lower = p, cv.root
		}
		cv.mark(pathBetween(cv.g, upper, lower))
	}
	return nil
}

// coverNames marks, for each name, the one task of that name that is root
// or below it.
func (cv *coverage) coverNames() error {
	g, rootID := cv.g, cv.rootID()
	for k, v := range cv.values {
		var match []int
		for _, p := range g.Named(v) {
			if cv.isDesc[p] || p == cv.root {
				match = append(match, p)
			}
		}
		switch len(match) {
		case 1:
			cv.covered[match[0]] = true
		case 0:
			if len(g.Named(v)) > 0 {
				return refuse(cv.field(k), "no task downstream of %s is named %q (%s is not downstream)", rootID, v, strings.Join(ids(g, g.Named(v)), ", "))
			}
			_, err := g.Lookup(v)
			return refuse(cv.field(k), "%v", err)
		default:
			return refuse(cv.field(k), "task name %q matches several tasks downstream of %s: %s; use coverage %q with the IDs you mean",
				v, rootID, strings.Join(ids(g, match), ", "), CoverIDs)
		}
	}
	return nil
}

// coverIDs marks each task by ID, which must be root or below it.
func (cv *coverage) coverIDs() error {
	for k, v := range cv.values {
		p, ok := cv.g.Index(v)
		if !ok {
			_, err := cv.g.Lookup(v)
			if err == nil {
				err = fmt.Errorf("%q is a name; coverage %q takes IDs", v, CoverIDs)
			}
			return refuse(cv.field(k), "%v", err)
		}
		if !cv.isDesc[p] && p != cv.root {
			return refuse(cv.field(k), "task %s is not downstream of %s", v, cv.rootID())
		}
		cv.covered[p] = true
	}
	return nil
}

// pathBetween returns every task on a path from upper down to lower (both
// left out): downstream of upper and upstream of lower, ascending.
func pathBetween(g *dag.Graph, upper, lower int) []int {
	return intersect(g.DescendantsAt(upper, dag.AllLevels), g.AncestorsAt(lower, dag.AllLevels))
}

// intersect returns the positions in both ascending lists.
func intersect(a, b []int) []int {
	var out []int
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			out = append(out, x)
		}
	}
	return out
}
