package store

import (
	"strings"
	"time"
)

// Observer is told how long each statement or transaction of the store
// took. op names it briefly, never with its arguments: a statement by its
// verb and first table ("select objects", "insert backfills"), a
// transaction by its kind ("tx batch_write"). It is called on the caller's
// goroutine, so it must be fast and safe for concurrent use.
type Observer func(op string, took time.Duration)

// Observe sets the observer (nil: none). Statements the store runs inside
// its transactions are counted in the transaction's time, not each.
func (s *Store) Observe(o Observer) {
	if o == nil {
		s.obs.Store(nil)
		return
	}
	s.obs.Store(&o)
}

// timed tells the observer, if any, that op started at start has ended.
// Use it as `defer s.timed(op, time.Now())`.
func (s *Store) timed(op string, start time.Time) {
	if o := s.obs.Load(); o != nil {
		(*o)(op, time.Since(start))
	}
}

// timedQuery is timed for a statement, named by operation.
func (s *Store) timedQuery(q string, start time.Time) {
	if o := s.obs.Load(); o != nil {
		(*o)(operation(q), time.Since(start))
	}
}

// operation names a statement by its verb and the first table it names
// after FROM, INTO or UPDATE: "select objects". The store's tables are few,
// so the names are too; a statement it cannot name so is its verb alone.
func operation(q string) string {
	q = strings.TrimLeft(q, " \t\r\n")
	end := strings.IndexAny(q, " \t\r\n(")
	if end < 0 {
		end = len(q)
	}
	verb := strings.ToLower(q[:end])
	var kw string
	switch verb {
	case "select", "delete":
		kw = "FROM"
	case "insert":
		kw = "INTO"
	case "update":
		kw = "UPDATE"
	default:
		if !isName(verb) {
			return "other"
		}
		return verb
	}
	rest, ok := after(q, kw)
	if !ok {
		return verb
	}
	rest = strings.TrimLeft(rest, " \t\r\n")
	end = strings.IndexAny(rest, " \t\r\n(,;")
	if end < 0 {
		end = len(rest)
	}
	table := strings.Trim(rest[:end], `"`)
	if !isName(table) {
		return verb
	}
	return verb + " " + table
}

// after returns what follows the first whole word kw of q.
func after(q, kw string) (string, bool) {
	for i := 0; ; {
		j := strings.Index(q[i:], kw)
		if j < 0 {
			return "", false
		}
		j += i
		end := j + len(kw)
		if (j == 0 || isSpace(q[j-1])) && (end == len(q) || isSpace(q[end])) {
			return q[end:], true
		}
		i = end
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isName reports whether s is a plain lower-case SQL name.
func isName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
