package dag

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// Levels passed to Upstream/Downstream traversals.
const AllLevels = -1

// Graph is an immutable dependency graph of tasks. Build it with New.
//
// Besides the ID-based methods, a graph numbers its tasks by their position
// in Tasks() (a topological order): Index, At, UpstreamAt, DownstreamAt,
// AncestorsAt and DescendantsAt let planners work on ints instead of
// strings. Because the numbering is topological, every upstream position is
// smaller than the positions downstream of it.
type Graph struct {
	tasks  []*Task          // topological order, ties by ID
	index  map[string]int   // ID → position
	byName map[string][]int // name → positions, ascending
	up     [][]int          // direct upstream positions, ascending
	down   [][]int          // direct downstream positions, ascending
}

// New builds the graph; it refuses duplicate IDs, unknown upstream IDs and
// cycles (naming the tasks on the cycle).
//
// A task listing itself upstream is refused too: a dependency on the task's
// own previous cycle is the SelfDependent flag, not an edge. New copies the
// tasks; repeated upstream IDs count once.
func New(tasks []Task) (*Graph, error) {
	ids, err := indexIDs(tasks)
	if err != nil {
		return nil, err
	}
	up, down, err := edges(tasks, ids)
	if err != nil {
		return nil, err
	}
	order, err := topoOrder(tasks, up, down)
	if err != nil {
		return nil, err
	}
	pos := make([]int, len(tasks)) // input position → topological position
	for p, i := range order {
		pos[i] = p
	}
	g := &Graph{
		tasks:  make([]*Task, len(tasks)),
		index:  make(map[string]int, len(tasks)),
		byName: make(map[string][]int),
		up:     make([][]int, len(tasks)),
		down:   make([][]int, len(tasks)),
	}
	for p, i := range order {
		t := tasks[i] // copy
		t.Upstream = slices.Clone(t.Upstream)
		t.Params = slices.Clone(t.Params)
		t.Outputs = slices.Clone(t.Outputs)
		g.tasks[p] = &t
		g.index[t.ID] = p
		g.byName[t.Name] = append(g.byName[t.Name], p)
		g.up[p] = remap(up[i], pos)
		g.down[p] = remap(down[i], pos)
	}
	return g, nil
}

// indexIDs maps each task's ID to its input position, refusing empty and
// duplicate IDs.
func indexIDs(tasks []Task) (map[string]int, error) {
	ids := make(map[string]int, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		if t.ID == "" {
			return nil, fmt.Errorf("task %d (name %q) has no ID", i+1, t.Name)
		}
		if _, dup := ids[t.ID]; dup {
			return nil, fmt.Errorf("task ID %q is defined twice", t.ID)
		}
		ids[t.ID] = i
	}
	return ids, nil
}

// edges returns each task's direct upstream and downstream tasks as input
// positions, in the order the tasks list them, each once.
func edges(tasks []Task, ids map[string]int) (up, down [][]int, err error) {
	up = make([][]int, len(tasks))
	down = make([][]int, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		for _, u := range t.Upstream {
			j, ok := ids[u]
			if !ok {
				return nil, nil, fmt.Errorf("task %q: upstream %q is not a task%s", t.ID, u, suggest(u, ids))
			}
			if j == i {
				return nil, nil, fmt.Errorf("task %q lists itself upstream; a dependency on its own previous cycle is self_dependent", t.ID)
			}
			if slices.Contains(up[i], j) {
				continue
			}
			up[i] = append(up[i], j)
			down[j] = append(down[j], i)
		}
	}
	return up, down, nil
}

// topoOrder returns the input positions in topological order by Kahn's
// algorithm, smallest ID first among the ready tasks, or an error naming a
// cycle.
func topoOrder(tasks []Task, up, down [][]int) ([]int, error) {
	n := len(tasks)
	indeg := make([]int, n)
	for i := range up {
		indeg[i] = len(up[i])
	}
	ready := &idHeap{tasks: tasks}
	for i := range n {
		if indeg[i] == 0 {
			ready.items = append(ready.items, i)
		}
	}
	heap.Init(ready)
	order := make([]int, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, d := range down[i] {
			indeg[d]--
			if indeg[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	if len(order) < n {
		return nil, fmt.Errorf("the tasks' dependencies form a cycle: %s", cycleText(tasks, up, indeg))
	}
	return order, nil
}

func remap(in []int, pos []int) []int {
	if len(in) == 0 {
		return nil
	}
	out := make([]int, len(in))
	for k, i := range in {
		out[k] = pos[i]
	}
	slices.Sort(out)
	return out
}

// cycleText names the tasks of one cycle among the tasks Kahn's algorithm
// could not order (indeg > 0), as "a → b → c → a" where each task is
// upstream of the next.
func cycleText(tasks []Task, up [][]int, indeg []int) string {
	start := -1
	for i, d := range indeg {
		if d > 0 && (start < 0 || tasks[i].ID < tasks[start].ID) {
			start = i
		}
	}
	// Walk upstream through unordered tasks until a task repeats: every
	// unordered task has an unordered upstream.
	seen := map[int]int{}
	var path []int
	i := start
	for {
		if at, ok := seen[i]; ok {
			path = path[at:]
			break
		}
		seen[i] = len(path)
		path = append(path, i)
		next := -1
		for _, u := range up[i] {
			if indeg[u] > 0 {
				next = u
				break
			}
		}
		i = next
	}
	// path lists each task then its upstream: print upstream first,
	// starting at the smallest ID.
	slices.Reverse(path)
	m := 0
	for k := range path {
		if tasks[path[k]].ID < tasks[path[m]].ID {
			m = k
		}
	}
	path = slices.Concat(path[m:], path[:m])
	var b strings.Builder
	for _, p := range path {
		b.WriteString(tasks[p].ID)
		b.WriteString(" → ")
	}
	b.WriteString(tasks[path[0]].ID)
	return b.String()
}

type idHeap struct {
	tasks []Task
	items []int
}

func (h *idHeap) Len() int           { return len(h.items) }
func (h *idHeap) Less(a, b int) bool { return h.tasks[h.items[a]].ID < h.tasks[h.items[b]].ID }
func (h *idHeap) Swap(a, b int)      { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *idHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *idHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// Tasks returns every task in a topological order (upstream first; ties by
// ID).
func (g *Graph) Tasks() []*Task { return slices.Clone(g.tasks) }

// Len returns the number of tasks.
func (g *Graph) Len() int { return len(g.tasks) }

// At returns the task at position i of Tasks().
func (g *Graph) At(i int) *Task { return g.tasks[i] }

// Index returns the position of the task with the given ID in Tasks().
func (g *Graph) Index(id string) (int, bool) {
	i, ok := g.index[id]
	return i, ok
}

// Task returns the task with the given ID.
func (g *Graph) Task(id string) (*Task, bool) {
	i, ok := g.index[id]
	if !ok {
		return nil, false
	}
	return g.tasks[i], true
}

// Lookup finds a task by ID, or by name when the name is unique; the error
// lists the IDs of every task of that name when it is not, and suggests
// close IDs and names when nothing matches.
func (g *Graph) Lookup(idOrName string) (*Task, error) {
	if i, ok := g.index[idOrName]; ok {
		return g.tasks[i], nil
	}
	switch same := g.byName[idOrName]; len(same) {
	case 0:
		return nil, fmt.Errorf("no task has ID or name %q%s", idOrName, g.suggest(idOrName))
	case 1:
		return g.tasks[same[0]], nil
	default:
		return nil, fmt.Errorf("task name %q is ambiguous: %s have it; give the ID", idOrName, strings.Join(g.ids(same), ", "))
	}
}

// Named returns the positions of the tasks named name, ascending.
func (g *Graph) Named(name string) []int { return g.byName[name] }

func (g *Graph) ids(pos []int) []string {
	out := make([]string, len(pos))
	for k, p := range pos {
		out[k] = g.tasks[p].ID
	}
	return out
}

func (g *Graph) suggest(s string) string {
	keys := make(map[string]int, len(g.index)+len(g.byName))
	for id := range g.index {
		keys[id] = 0
	}
	for name := range g.byName {
		keys[name] = 0
	}
	return suggest(s, keys)
}

// suggest returns `; did you mean "x"?` for the up to three keys closest to
// s by edit distance, when they are close enough to be typos.
func suggest[V any](s string, keys map[string]V) string {
	type cand struct {
		key  string
		dist int
	}
	limit := max(2, len(s)/3)
	var cs []cand
	for k := range keys {
		if d := editDistance(s, k, limit); d <= limit {
			cs = append(cs, cand{k, d})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.key, b.key)
	})
	var q []string
	for _, c := range cs[:min(3, len(cs))] {
		q = append(q, fmt.Sprintf("%q", c.key))
	}
	return "; did you mean " + strings.Join(q, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b, or limit+1 once it
// is certainly larger than limit.
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Upstream and Downstream return the direct neighbours' IDs, sorted.
func (g *Graph) Upstream(id string) []string   { return g.neighbours(id, g.up) }
func (g *Graph) Downstream(id string) []string { return g.neighbours(id, g.down) }

func (g *Graph) neighbours(id string, adj [][]int) []string {
	i, ok := g.index[id]
	if !ok || len(adj[i]) == 0 {
		return nil
	}
	out := g.ids(adj[i])
	slices.Sort(out)
	return out
}

// UpstreamAt and DownstreamAt return the positions of the direct
// neighbours of the task at position i, ascending. The slices belong to
// the graph: do not modify them.
func (g *Graph) UpstreamAt(i int) []int   { return g.up[i] }
func (g *Graph) DownstreamAt(i int) []int { return g.down[i] }

// Ancestors and Descendants return the IDs reachable within levels steps
// (AllLevels for no limit), not including id, in topological order.
func (g *Graph) Ancestors(id string, levels int) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.ids(g.AncestorsAt(i, levels))
}

func (g *Graph) Descendants(id string, levels int) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.ids(g.DescendantsAt(i, levels))
}

// AncestorsAt and DescendantsAt are Ancestors and Descendants on
// positions: the positions reachable from i within levels steps (any
// negative levels for no limit), not including i, ascending.
func (g *Graph) AncestorsAt(i, levels int) []int   { return g.reach(i, levels, g.up) }
func (g *Graph) DescendantsAt(i, levels int) []int { return g.reach(i, levels, g.down) }

// reach is a breadth-first search, so a task's level is its shortest
// distance from i.
func (g *Graph) reach(i, levels int, adj [][]int) []int {
	if levels == 0 {
		return nil
	}
	seen := make([]bool, len(g.tasks))
	seen[i] = true
	var out []int
	frontier := []int{i}
	for depth := 0; len(frontier) > 0 && (levels < 0 || depth < levels); depth++ {
		var next []int
		for _, f := range frontier {
			for _, n := range adj[f] {
				if !seen[n] {
					seen[n] = true
					next = append(next, n)
					out = append(out, n)
				}
			}
		}
		frontier = next
	}
	slices.Sort(out)
	return out
}
