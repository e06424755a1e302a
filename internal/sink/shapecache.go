package sink

import (
	"slices"

	"github.com/tidemark/tidemark/internal/change"
)

// maxShapes bounds a ShapeCache: past it the cache starts over.
const maxShapes = 4096

// ShapeCache memoizes what a sink derives from a table (quoted names,
// statements), keyed by the *change.Table. An entry is rebuilt when the
// table's shape changed since: a caller may reuse a Table it altered.
// It is not safe for concurrent use, like a Sink.
type ShapeCache[T any] struct {
	build   func(*change.Table) (T, error)
	entries map[*change.Table]shaped[T]
}

type shaped[T any] struct {
	shape change.Table // a copy of the shape v was built from
	v     T
}

// NewShapeCache returns a cache that builds missing entries with build.
func NewShapeCache[T any](build func(*change.Table) (T, error)) *ShapeCache[T] {
	return &ShapeCache[T]{build: build, entries: map[*change.Table]shaped[T]{}}
}

// Get returns t's entry, building it when missing or outdated.
func (c *ShapeCache[T]) Get(t *change.Table) (T, error) {
	if e, ok := c.entries[t]; ok && sameShape(&e.shape, t) {
		return e.v, nil
	}
	v, err := c.build(t)
	if err != nil {
		return v, err
	}
	if len(c.entries) >= maxShapes {
		clear(c.entries)
	}
	c.entries[t] = shaped[T]{shape: change.Table{ID: t.ID, Columns: slices.Clone(t.Columns), Key: slices.Clone(t.Key)}, v: v}
	return v, nil
}

func sameShape(a, b *change.Table) bool {
	return a.ID == b.ID && slices.Equal(a.Columns, b.Columns) && slices.Equal(a.Key, b.Key)
}

// Memo memoizes statements by a key, building each on first use.
type Memo map[string]string

// Get returns the statement for key.
func (m Memo) Get(key string, build func() string) string {
	if s, ok := m[key]; ok {
		return s
	}
	s := build()
	m[key] = s
	return s
}
