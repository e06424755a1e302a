// Package suggest finds the names a mistyped name was probably meant to
// be, for "did you mean" hints in errors.
package suggest

import (
	"slices"
	"strings"
)

// maxLen bounds the names Distance compares in full: longer ones are
// taken as far apart, so that a hint never costs much.
const maxLen = 256

// Distance is the number of single-byte edits (insertions, deletions,
// substitutions) that turn a into b; a name longer than 256 bytes is as far
// from any other as it is long.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest returns the candidates nearest to name, up to three in name
// order, when they are close enough to be a typo of it: at most
// max(2, len(name)/5) edits, or the same name in another case (which is
// nearest).
func Closest(name string, candidates []string) []string {
	type cand struct {
		name string
		dist int
	}
	limit := max(2, len(name)/5)
	var cs []cand
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := Distance(name, c)
		if strings.EqualFold(name, c) {
			d = 0
		}
		if d <= limit && !slices.ContainsFunc(cs, func(x cand) bool { return x.name == c }) {
			cs = append(cs, cand{c, d})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, c := range cs {
		if c.dist > cs[0].dist || len(out) == 3 {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// Hint is "; did you mean a?" (or "a or b"), "" for no names.
func Hint(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(names, " or ") + "?"
}
