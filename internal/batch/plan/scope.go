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

// NotSelected reports whether an instance's reason says that its task is
// not selected and is in the plan only to connect selected tasks: its
// instances dry-run so that what is below them proceeds.
func NotSelected(reason string) bool {
	return reason == reasonExcluded || reason == reasonFiltered
}

// selection is the outcome of the scope: per graph position, whether the
// task is planned and, when it is only there to connect selected tasks,
// why.
type selection struct {
	planned []bool
	between []string // non-empty: planned as dry-run for this reason
	// notes for Plan.Warnings.
	warnings []string
}

// selectTasks applies the scope to the graph from the start task root:
// the coverage, minus the exclusions and the paused filter, plus the tasks
// that connect what remains.
func selectTasks(g *dag.Graph, root int, s Scope) (*selection, error) {
	covered, err := cover(g, root, s)
	if err != nil {
		return nil, err
	}
	excluded, err := exclusions(g, s)
	if err != nil {
		return nil, err
	}
	sel := &selection{planned: make([]bool, g.Len()), between: make([]string, g.Len())}
	selected := make([]bool, g.Len())
	for i := range selected {
		selected[i] = covered[i] && !excluded[i]
	}
	if s.Mode != ScopeTask && !s.KeepPaused {
		if w := filterPaused(g, root, selected); w != "" {
			sel.warnings = append(sel.warnings, w)
		}
	}
	if !slices.Contains(selected, true) {
		return nil, refuse("scope", "the selection is empty: every covered task is excluded or filtered out as paused")
	}
	sel.connect(g, selected, covered, excluded)
	return sel, nil
}

// exclusions marks the excluded tasks. They are matched over the whole
// graph, so that an excluded task outside the coverage still connects
// selected tasks (as dry-run).
func exclusions(g *dag.Graph, s Scope) ([]bool, error) {
	excluded := make([]bool, g.Len())
	outputs := make(map[string]bool, len(s.ExcludeOutputs))
	for _, o := range s.ExcludeOutputs {
		outputs[o] = true
	}
	found := make(map[string]bool)
	for i := range excluded {
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
		if i, ok := g.Index(v); ok {
			excluded[i] = true
			continue
		}
		named := g.Named(v)
		if len(named) == 0 {
			_, err := g.Lookup(v)
			return nil, refuse(fmt.Sprintf("scope.exclude_tasks[%d]", k), "%v", err)
		}
		for _, i := range named { // a name excludes every task that has it
			excluded[i] = true
		}
	}
	return excluded, nil
}

// filterPaused takes paused tasks and everything downstream of them out of
// a list or mass selection, and returns the warning saying so ("" when
// nothing left). The start task stays (its paused policy applies) and the
// filter does not pass through it: what is below it is what was asked for.
func filterPaused(g *dag.Graph, root int, selected []bool) string {
	filtered := make([]bool, g.Len())
	var paused []string
	nFiltered := 0
	for i := range filtered { // topological: upstream first
		seed := selected[i] && i != root && g.At(i).Paused
		if seed {
			paused = append(paused, g.At(i).ID)
		}
		below := anyAt(filtered, g.UpstreamAt(i))
		filtered[i] = (seed || below) && i != root
		if filtered[i] && selected[i] {
			selected[i] = false
			nFiltered++
		}
	}
	if nFiltered == 0 {
		return ""
	}
	return fmt.Sprintf("%d tasks left the selection as paused (%s) or downstream of a paused task; set scope.keep_paused to keep them",
		nFiltered, short(paused))
}

// connect plans the selected tasks and, as dry-run, each covered or
// excluded task that is not selected but lies on a path between two
// selected tasks, so that what is below it proceeds in order.
func (sel *selection) connect(g *dag.Graph, selected, covered, excluded []bool) {
	below, above := belowAny(g, selected), aboveAny(g, selected)
	var between []string
	for i := range selected {
		sel.planned[i] = selected[i]
		if selected[i] || !(covered[i] || excluded[i]) || !below[i] || !above[i] {
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
}

// belowAny marks the tasks downstream of any marked task (not the marked
// tasks themselves, unless they are downstream of another).
func belowAny(g *dag.Graph, marked []bool) []bool {
	below := make([]bool, len(marked))
	for i := range below { // topological: upstream first
		for _, u := range g.UpstreamAt(i) {
			if marked[u] || below[u] {
				below[i] = true
				break
			}
		}
	}
	return below
}

// aboveAny marks the tasks upstream of any marked task, as belowAny.
func aboveAny(g *dag.Graph, marked []bool) []bool {
	above := make([]bool, len(marked))
	for i := len(above) - 1; i >= 0; i-- { // downstream first
		for _, d := range g.DownstreamAt(i) {
			if marked[d] || above[d] {
				above[i] = true
				break
			}
		}
	}
	return above
}

// anyAt reports whether any of the positions is set in flags.
func anyAt(flags []bool, pos []int) bool {
	for _, p := range pos {
		if flags[p] {
			return true
		}
	}
	return false
}

// short lists up to five IDs.
func short(ids []string) string {
	if len(ids) <= 5 {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:5], ", ") + fmt.Sprintf(" and %d more", len(ids)-5)
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
