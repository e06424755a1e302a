package runner

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

const (
	// logHeadSize is how much of the beginning of a log is always kept:
	// where a script says what it is doing.
	logHeadSize = 64 << 10
	// DefaultLogLimit is the limit of NewLog(0).
	DefaultLogLimit = 1 << 20
)

// Log is an attempt's output, bounded: it keeps the first 64 KiB written
// and the last limit-64KiB bytes, and replaces what lies between with a
// "[… N bytes omitted …]" line. It is safe for concurrent use; each Write
// is kept whole relative to other Writes (a script's stdout and stderr
// interleave as written).
type Log struct {
	mu      sync.Mutex
	headCap int
	head    []byte
	tailCap int
	ring    []byte // allocated on the first byte past the head
	ringPos int    // where the next tail byte goes
	ringLen int    // tail bytes held, at most tailCap
	total   int64
}

// NewLog returns an empty log keeping at most limit bytes (plus the
// omission marker); limit <= 0 means DefaultLogLimit. A limit below 64 KiB
// keeps only the head.
func NewLog(limit int) *Log {
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	head := min(limit, logHeadSize)
	return &Log{headCap: head, tailCap: limit - head}
}

// Write keeps p, or the parts of it within the limit. It never fails.
func (l *Log) Write(p []byte) (int, error) {
	n := len(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total += int64(n)
	if k := min(len(p), l.headCap-len(l.head)); k > 0 {
		l.head = append(l.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || l.tailCap == 0 {
		return n, nil
	}
	if l.ring == nil {
		l.ring = make([]byte, l.tailCap)
	}
	if len(p) >= l.tailCap {
		copy(l.ring, p[len(p)-l.tailCap:])
		l.ringPos, l.ringLen = 0, l.tailCap
		return n, nil
	}
	k := copy(l.ring[l.ringPos:], p)
	copy(l.ring, p[k:])
	l.ringPos = (l.ringPos + len(p)) % l.tailCap
	l.ringLen = min(l.ringLen+len(p), l.tailCap)
	return n, nil
}

// Len is the number of bytes written, including omitted ones.
func (l *Log) Len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// String returns what the log kept. Where bytes were omitted, the cut never
// splits a UTF-8 sequence: partial characters at its edges count as omitted.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var tail []byte
	if l.ringLen < l.tailCap {
		tail = l.ring[:l.ringLen] // not wrapped yet: ringPos == ringLen
	} else {
		tail = append(append(make([]byte, 0, l.tailCap), l.ring[l.ringPos:]...), l.ring[:l.ringPos]...)
	}
	omitted := l.total - int64(len(l.head)) - int64(len(tail))
	if omitted == 0 {
		return string(l.head) + string(tail)
	}
	head := trimPartialRuneEnd(l.head)
	tail = trimPartialRuneStart(tail)
	omitted = l.total - int64(len(head)) - int64(len(tail))
	var b strings.Builder
	b.Grow(len(head) + len(tail) + 48)
	b.Write(head)
	fmt.Fprintf(&b, "\n[… %d bytes omitted …]\n", omitted)
	b.Write(tail)
	return b.String()
}

// trimPartialRuneEnd drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRuneEnd(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// trimPartialRuneStart drops continuation bytes at the start of b, the rest
// of a character whose beginning was omitted.
func trimPartialRuneStart(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
