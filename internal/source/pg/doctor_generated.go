package pg

import (
	"context"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/genexpr"
	"github.com/tidemark/tidemark/internal/sink"
)

// generated says what becomes of the included tables' stored generated
// columns, which the log leaves out of every change (docs/type-mapping.md):
// the destination computes them, or their values are read from the source
// for every change (a query per transaction), or — a generated key column
// — the table is not streamed. A warning unless the destination computes
// every one.
func (src *sourceCheck) generated(context.Context) Check {
	name := src.name("generated columns")
	if src.tables == nil {
		return fail(name, "not checked: the tables could not be listed", "")
	}
	// The destination's type says in which dialect it computes them.
	var dialect genexpr.Dialect
	destName := src.s.Destination.Type
	if typ, err := sink.Lookup(src.s.Destination.Type); err == nil {
		dialect, destName = typ.Generated, typ.Title
	}
	var computed, reread, reasons []string
	for _, t := range src.described {
		for i, c := range t.Columns {
			if c.Generated == "" {
				continue
			}
			col := fmt.Sprintf("%s.%s", t.ID, ident(c.Name))
			if dialect == 0 {
				reread = append(reread, col)
				reasons = append(reasons, col+": the "+destName+" destination computes no generated column")
				continue
			}
			if _, err := genexpr.Render(dialect, t, i); err != nil {
				reread = append(reread, col)
				reasons = append(reasons, col+": "+err.Error())
				continue
			}
			computed = append(computed, col)
		}
	}
	var parts []string
	if len(computed) > 0 {
		parts = append(parts, fmt.Sprintf("the %s destination computes %s", destName, list(computed, 10)))
	}
	if len(reread) > 0 {
		parts = append(parts, fmt.Sprintf("the values of %s are read from the source for every insert and update (a query per transaction)", list(reread, 10)))
	}
	if len(src.generatedKeys) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s a generated key column and will not be replicated (their objects fail)",
			list(src.generatedKeys, 10), plural(len(src.generatedKeys), "has", "have")))
	}
	switch {
	case len(reread) > 0 || len(src.generatedKeys) > 0:
		fix := strings.Join(reasons, "\n")
		if len(src.generatedKeys) > 0 {
			fix = strings.TrimSpace(fix + "\nkey the tables by ordinary columns: see the table keys check")
		}
		return warn(name, strings.Join(parts, "; "), fix)
	case len(computed) > 0:
		return ok(name, parts[0])
	}
	return ok(name, "no included table has a stored generated column")
}
