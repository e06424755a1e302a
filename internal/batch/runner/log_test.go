package runner

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestLogKeepsEverythingWithinLimit(t *testing.T) {
	t.Parallel()
	l := NewLog(0)
	fmt.Fprint(l, "one\n")
	fmt.Fprint(l, "two\n")
	if got := l.String(); got != "one\ntwo\n" || l.Len() != 8 {
		t.Fatalf("String() = %q, Len() = %d", got, l.Len())
	}
}

func TestLogTruncationKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	const tail = 100
	l := NewLog(logHeadSize + tail)
	head := strings.Repeat("h", logHeadSize)
	l.Write([]byte(head))
	// Small writes that wrap around the tail buffer several times, then a
	// write larger than it, then small ones again.
	for i := range 1000 {
		fmt.Fprintf(l, "m%03d;", i)
	}
	l.Write([]byte(strings.Repeat("M", 3*tail)))
	var want strings.Builder
	for i := range 30 {
		fmt.Fprintf(l, "t%02d", i)
		fmt.Fprintf(&want, "t%02d", i)
	}
	end := strings.Repeat("M", 10) + want.String() // the last 100 bytes
	total := int64(logHeadSize + 5000 + 3*tail + 90)
	omitted := total - logHeadSize - tail
	got := l.String()
	if exp := head + fmt.Sprintf("\n[… %d bytes omitted …]\n", omitted) + end; got != exp {
		t.Fatalf("String() ends %q, want it to end %q", got[len(got)-200:], exp[len(exp)-200:])
	}
	if l.Len() != total {
		t.Fatalf("Len() = %d, want %d", l.Len(), total)
	}
}

func TestLogBelowHeadSizeKeepsOnlyHead(t *testing.T) {
	t.Parallel()
	l := NewLog(4)
	l.Write([]byte("abcdefgh"))
	if got := l.String(); got != "abcd\n[… 4 bytes omitted …]\n" {
		t.Fatalf("String() = %q", got)
	}
}

func TestLogCutDoesNotSplitCharacters(t *testing.T) {
	t.Parallel()
	l := NewLog(logHeadSize + 4)
	l.Write([]byte(strings.Repeat("a", logHeadSize-1)))
	l.Write([]byte("é")) // 2 bytes across the head's end
	l.Write([]byte("xxxx"))
	l.Write([]byte("yé€")) // tail keeps the last 4 bytes: the end of é, then €
	got := l.String()
	want := strings.Repeat("a", logHeadSize-1) + "\n[… 9 bytes omitted …]\n" + "€"
	if got != want {
		t.Fatalf("String() ends %q, want %q", got[len(got)-40:], want[len(want)-40:])
	}
}

func TestLogConcurrentWritesStayWhole(t *testing.T) {
	t.Parallel()
	l := NewLog(0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(l, "writer %d line %03d\n", w, i)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(l.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, line := range lines {
		var w, i int
		if n, err := fmt.Sscanf(line, "writer %d line %d", &w, &i); n != 2 || err != nil {
			t.Fatalf("torn line %q", line)
		}
	}
}
