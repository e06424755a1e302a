package source_test

import (
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/source"
	_ "github.com/tidemark/tidemark/internal/source/all"
)

// TestRegistry: every linked source type is found by its configuration
// name and writes positions in its own notation; an unknown type is an
// error naming the supported ones; a duplicate or incomplete registration
// is refused at start.
func TestRegistry(t *testing.T) {
	typ, err := source.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if got := typ.FormatPosition(change.LSN(0x16B3748)); got != "0/16B3748" {
		t.Errorf("postgres position = %q, want 0/16B3748", got)
	}
	if got := source.FormatPosition("postgres", change.LSN(1<<32|0x10)); got != "1/10" {
		t.Errorf("FormatPosition = %q, want 1/10", got)
	}
	_, err = source.Lookup("oracle")
	if err == nil || !strings.Contains(err.Error(), `"oracle" is not supported`) || !strings.Contains(err.Error(), "postgres") {
		t.Errorf("unknown type error = %v, want it to name the type and the supported ones", err)
	}
	if names := source.Names(); len(names) == 0 || names[0] == "" {
		t.Errorf("Names() = %v", names)
	}
	mustPanic(t, "duplicate", func() { source.Register(typ) })
	mustPanic(t, "incomplete", func() { source.Register(source.Type{Name: "half", Open: typ.Open}) })
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s registration did not panic", what)
		}
	}()
	fn()
}
