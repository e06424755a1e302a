package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark/tidemark/internal/batch/dag"
)

// Why a task that is not selected still has (dry-run) instances.
const (
	reasonExcluded = "excluded; dry-run so that downstream proceeds"
	reasonFiltered = "paused, filtered out of the selection; dry-run so that downstream proceeds"
)

// selection is the outcome of the scope: per graph position, whether the
// task is planned and, when it is only there to connect selected tasks,
// why.
type selection struct {
	planned []bool
	between []string // non-empty: planned as dry-run for this reason
	// notes for Plan.Warnings.
	warnings []string
}

// selectTasks applies the scope to the graph from the start task root.
func selectTasks(g *dag.Graph, root int, s Scope) (*selection, error) {
	n := g.Len()
	covered, err := cover(g, root, s)
	if err != nil {
		return nil, err
	}
	sel := &selection{planned: make([]bool, n), between: make([]string, n)}

	// Exclusions: matched over the whole graph, so that an excluded task
	// outside the coverage still connects selected tasks (as dry-run).
	excluded := make([]bool, n)
	outputs := make(map[string]bool, len(s.ExcludeOutputs))
	for _, o := range s.ExcludeOutputs {
		outputs[o] = true
	}
	found := make(map[string]bool)
	for i := range n {
		if o := g.At(i).Output; o != "" && outputs[o] {
			excluded[i] = true
			found[o] = true
		}
	}
	for k, o := range s.ExcludeOutputs {
		if !found[o] {
			return nil, refuse(fmt.Sprintf("scope.exclude_outputs[%d]", k), "no task outputs %q", o)
		}
	}
	for k, v := range s.ExcludeTasks {
		field := fmt.Sprintf("scope.exclude_tasks[%d]", k)
		if i, ok := g.Index(v); ok {
			excluded[i] = true
			continue
		}
		named := g.Named(v)
		if len(named) == 0 {
			_, err := g.Lookup(v)
			return nil, refuse(field, "%v", err)
		}
		for _, i := range named { // a name excludes every task that has it
			excluded[i] = true
		}
	}

	selected := make([]bool, n)
	count := 0
	for i := range n {
		if covered[i] && !excluded[i] {
			selected[i] = true
			count++
		}
	}

	// Paused tasks and everything downstream of them leave list and mass
	// selections. The start task stays (its paused policy applies) and the
	// filter does not pass through it: what is below it is what was asked
	// for.
	filtered := make([]bool, n)
	if s.Mode != ScopeTask && !s.KeepPaused {
		var paused []string
		nFiltered := 0
		for i := range n { // topological: upstream first
			seed := selected[i] && i != root && g.At(i).Paused
			if seed {
				paused = append(paused, g.At(i).ID)
			}
			below := false
			for _, u := range g.UpstreamAt(i) {
				if filtered[u] {
					below = true
					break
				}
			}
			filtered[i] = (seed || below) && i != root
			if filtered[i] && selected[i] {
				selected[i] = false
				count--
				nFiltered++
			}
		}
		if nFiltered > 0 {
			sel.warnings = append(sel.warnings, fmt.Sprintf(
				"%d tasks left the selection as paused (%s) or downstream of a paused task; set scope.keep_paused to keep them",
				nFiltered, short(paused)))
		}
	}
	if count == 0 {
		return nil, refuse("scope", "the selection is empty: every covered task is excluded or filtered out as paused")
	}

	// A task that is not selected but lies on a path between two selected
	// tasks runs as dry-run, so that what is below it proceeds in order.
	fromSel := make([]bool, n) // downstream of a selected task
	for i := range n {
		for _, u := range g.UpstreamAt(i) {
			if selected[u] || fromSel[u] {
				fromSel[i] = true
				break
			}
		}
	}
	toSel := make([]bool, n) // upstream of a selected task
	for i := n - 1; i >= 0; i-- {
		for _, d := range g.DownstreamAt(i) {
			if selected[d] || toSel[d] {
				toSel[i] = true
				break
			}
		}
	}
	var between []string
	for i := range n {
		sel.planned[i] = selected[i]
		if selected[i] || !(covered[i] || excluded[i]) || !fromSel[i] || !toSel[i] {
			continue
		}
		sel.planned[i] = true
		if excluded[i] {
			sel.between[i] = reasonExcluded
		} else {
			sel.between[i] = reasonFiltered
		}
		between = append(between, g.At(i).ID)
	}
	if len(between) > 0 {
		sel.warnings = append(sel.warnings, fmt.Sprintf(
			"%d tasks between selected tasks are not selected and run as dry-run so that downstream proceeds: %s",
			len(between), short(between)))
	}
	return sel, nil
}

// short lists up to five IDs.
func short(ids []string) string {
	if len(ids) <= 5 {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:5], ", ") + fmt.Sprintf(" and %d more", len(ids)-5)
}

// cover returns the tasks the scope covers before exclusions and the
// paused filter.
func cover(g *dag.Graph, root int, s Scope) ([]bool, error) {
	n := g.Len()
	c := make([]bool, n)
	c[root] = true
	mark := func(pos []int) {
		for _, p := range pos {
			c[p] = true
		}
	}
	rootID := g.At(root).ID
	switch s.Mode {
	case ScopeTask:
		return c, nil
	case ScopeList:
		mark(g.DescendantsAt(root, s.Downstream))
		mark(g.AncestorsAt(root, s.Upstream))
		return c, nil
	}

	desc := g.DescendantsAt(root, dag.AllLevels)
	isDesc := make([]bool, n)
	for _, p := range desc {
		isDesc[p] = true
	}
	field := func(k int) string { return fmt.Sprintf("scope.values[%d]", k) }
	// markWhere marks the descendants whose key is among the values, after
	// checking that each value is some task's key.
	markWhere := func(key func(*dag.Task) string, what string) error {
		want := make(map[string]bool, len(s.Values))
		for _, v := range s.Values {
			want[v] = true
		}
		exists := make(map[string]bool)
		for i := range n {
			if k := key(g.At(i)); want[k] {
				exists[k] = true
				if isDesc[i] {
					c[i] = true
				}
			}
		}
		for k, v := range s.Values {
			if !exists[v] {
				return refuse(field(k), "no task has %s %q", what, v)
			}
		}
		return nil
	}

	switch s.Coverage {
	case CoverProjects:
		return c, markWhere(func(t *dag.Task) string { return t.Project }, "project")
	case CoverOutputs:
		return c, markWhere(func(t *dag.Task) string { return t.Output }, "output")
	case CoverDescendants:
		mark(desc)
	case CoverAncestors:
		mark(g.AncestorsAt(root, dag.AllLevels))
	case CoverAncestorsDescendants:
		mark(desc)
		mark(g.AncestorsAt(root, dag.AllLevels))
	case CoverChildren:
		children := g.DownstreamAt(root)
		for k, v := range s.Values {
			var match []int
			for _, ch := range children {
				if t := g.At(ch); t.ID == v || t.Name == v {
					match = append(match, ch)
				}
			}
			switch len(match) {
			case 1:
				c[match[0]] = true
				mark(g.DescendantsAt(match[0], dag.AllLevels))
			case 0:
				if _, err := g.Lookup(v); err != nil {
					return nil, refuse(field(k), "%v", err)
				}
				return nil, refuse(field(k), "%q is not a level-1 child of %s; its children are %s",
					v, rootID, listOr(g.Downstream(rootID), "none"))
			default:
				return nil, refuse(field(k), "several children of %s are named %q: %s; give the ID", rootID, v, strings.Join(ids(g, match), ", "))
			}
		}
	case CoverEndPoints, CoverStartPoints:
		end := s.Coverage == CoverEndPoints
		for k, v := range s.Values {
			t, err := g.Lookup(v)
			if err != nil {
				return nil, refuse(field(k), "%v", err)
			}
			p, _ := g.Index(t.ID)
			c[p] = true
			// Every task on a path between the two: downstream of the
			// upper one and upstream of the lower one. When the point is
			// not on the expected side, the two are backfilled alone.
			var path []int
			if end {
				path = intersect(desc, g.AncestorsAt(p, dag.AllLevels))
			} else {
				path = intersect(g.AncestorsAt(root, dag.AllLevels), g.DescendantsAt(p, dag.AllLevels))
			}
			mark(path)
		}
	case CoverNames:
		for k, v := range s.Values {
			var match []int
			for _, p := range g.Named(v) {
				if isDesc[p] || p == root {
					match = append(match, p)
				}
			}
			switch len(match) {
			case 1:
				c[match[0]] = true
			case 0:
				if len(g.Named(v)) > 0 {
					return nil, refuse(field(k), "no task downstream of %s is named %q (%s is not downstream)", rootID, v, strings.Join(ids(g, g.Named(v)), ", "))
				}
				_, err := g.Lookup(v)
				return nil, refuse(field(k), "%v", err)
			default:
				return nil, refuse(field(k), "task name %q matches several tasks downstream of %s: %s; use coverage %q with the IDs you mean",
					v, rootID, strings.Join(ids(g, match), ", "), CoverIDs)
			}
		}
	case CoverIDs:
		for k, v := range s.Values {
			p, ok := g.Index(v)
			if !ok {
				_, err := g.Lookup(v)
				if err == nil {
					err = fmt.Errorf("%q is a name; coverage %q takes IDs", v, CoverIDs)
				}
				return nil, refuse(field(k), "%v", err)
			}
			if !isDesc[p] && p != root {
				return nil, refuse(field(k), "task %s is not downstream of %s", v, rootID)
			}
			c[p] = true
		}
	}
	return c, nil
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

func ids(g *dag.Graph, pos []int) []string {
	out := make([]string, len(pos))
	for k, p := range pos {
		out[k] = g.At(p).ID
	}
	return out
}

func listOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, ", ")
}
