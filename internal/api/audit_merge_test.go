package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The merge of the two kinds' lists: newest first by created_at, then id;
// on a full tie the stream record (the first list's) first; the limit
// after the merge.
func TestMergeAudit(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 15, 4, 5, 123456000, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	// rec is "s7@3": a stream record with id 7 created at t0+3s ("b…" batch).
	rec := func(spec string) AuditRecord {
		var kind byte
		var id int64
		var sec int
		if _, err := fmt.Sscanf(spec, "%c%d@%d", &kind, &id, &sec); err != nil {
			t.Fatalf("spec %q: %v", spec, err)
		}
		k := AuditStream
		if kind == 'b' {
			k = AuditBatch
		}
		return AuditRecord{Kind: k, ID: id, CreatedAt: at(sec)}
	}
	list := func(specs string) []AuditRecord {
		var out []AuditRecord
		for s := range strings.FieldsSeq(specs) {
			out = append(out, rec(s))
		}
		return out
	}
	for _, c := range []struct {
		name          string
		streams, bats string
		limit         int
		want          string
	}{
		{"both empty", "", "", 1000, ""},
		{"streams only", "s3@3 s2@2 s1@1", "", 1000, "s3@3 s2@2 s1@1"},
		{"batches only", "", "b2@5 b1@4", 1000, "b2@5 b1@4"},
		{"interleaved", "s3@6 s2@3 s1@1", "b3@5 b2@4 b1@2", 1000, "s3@6 b3@5 b2@4 s2@3 b1@2 s1@1"},
		{"one list wholly newer", "s2@9 s1@8", "b2@2 b1@1", 1000, "s2@9 s1@8 b2@2 b1@1"},
		{"same time: higher id first", "s4@5 s1@1", "b7@5 b2@5", 1000, "b7@5 s4@5 b2@5 s1@1"},
		{"full tie: stream first", "s5@5", "b5@5", 1000, "s5@5 b5@5"},
		{"limit after the merge", "s3@6 s2@3 s1@1", "b3@5 b2@4 b1@2", 4, "s3@6 b3@5 b2@4 s2@3"},
		{"limit takes from one list", "s2@9 s1@8", "b2@2 b1@1", 2, "s2@9 s1@8"},
		{"limit 1", "s1@1", "b1@2", 1, "b1@2"},
		{"limit over the total", "s1@1", "b1@2", 100000, "b1@2 s1@1"},
		{"no limit", "s2@2 s1@1", "b1@3", 0, "b1@3 s2@2 s1@1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			streams, bats := list(c.streams), list(c.bats)
			inS, inB := slices.Clone(streams), slices.Clone(bats)
			got := mergeAudit(streams, bats, c.limit)
			if got == nil {
				t.Fatal("nil, want an empty list at least")
			}
			var specs []string
			for _, r := range got {
				specs = append(specs, fmt.Sprintf("%c%d@%d", r.Kind[0], r.ID, int(r.CreatedAt.Sub(t0)/time.Second)))
			}
			if s := strings.Join(specs, " "); s != c.want {
				t.Errorf("merge(%q, %q, %d) = %q, want %q", c.streams, c.bats, c.limit, s, c.want)
			}
			if !slices.EqualFunc(streams, inS, eqAudit) || !slices.EqualFunc(bats, inB, eqAudit) {
				t.Error("the inputs changed")
			}
		})
	}
}

func eqAudit(a, b AuditRecord) bool {
	return a.Kind == b.Kind && a.ID == b.ID && a.CreatedAt.Equal(b.CreatedAt)
}

func TestAcceptsCSV(t *testing.T) {
	for _, c := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"*/*"}, false},
		{[]string{"text/csv"}, true},
		{[]string{"text/csv; charset=utf-8"}, true},
		{[]string{"application/json"}, false},
		{[]string{"application/json, text/csv"}, false},
		{[]string{"text/csv, application/json"}, true},
		{[]string{"application/json;q=0.5, text/csv"}, true},
		{[]string{"text/csv;q=0.2, application/json;q=0.9"}, false},
		{[]string{"text/csv;q=0"}, false},
		{[]string{"text/html", "text/csv"}, true},
		{[]string{"text/csv;q=x"}, false},
	} {
		if got := acceptsCSV(c.accept); got != c.want {
			t.Errorf("acceptsCSV(%q) = %v, want %v", c.accept, got, c.want)
		}
	}
}
