package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// checkNames refuses (sink.ErrTableName) a table SQLite cannot hold apart
// from others. SQLite compares names without regard to ASCII case, and a
// table of another schema than public is named "schema.table" in one
// identifier, so two source tables may meet in one destination table
// ("Orders" and "orders"; public."a.b" and a.b) and two columns in one
// column ("A" and "a"). Writing both into one would mix their rows, or
// fail the CREATE TABLE and with it the whole stream; the table is refused
// instead and its object fails with the reason. A table keeps its
// destination table: the one whose name SQLite holds with the same bytes
// is the owner, and within a start the first one discovered.
func (s *Sink) checkNames(ctx context.Context, t *change.Table) error {
	cols := make(map[string]string, len(t.Columns))
	for _, c := range t.Columns {
		f := foldASCII(c.Name)
		if other, ok := cols[f]; ok {
			return fmt.Errorf("table %s: columns %q and %q have one name in SQLite, which ignores case in names: %w; rename one, or replicate the table into PostgreSQL", t.ID, other, c.Name, sink.ErrTableName)
		}
		cols[f] = c.Name
	}
	name := tableName(t.ID)
	folded := foldASCII(name)
	if strings.HasPrefix(folded, "_tidemark_") || strings.HasPrefix(folded, "sqlite_") {
		return fmt.Errorf("table %s: its SQLite name %q is reserved for tidemark's or SQLite's own tables: %w; rename it, or exclude it from the stream", t.ID, name, sink.ErrTableName)
	}
	if other, ok := s.claims[folded]; ok && other != t.ID {
		return fmt.Errorf("table %s: its SQLite name %q is also that of %s (SQLite ignores case in names; a schema other than public is part of the name): %w; exclude one of them from the stream", t.ID, name, other, sink.ErrTableName)
	}
	// Tables, views and indexes share one namespace; CREATE TABLE IF NOT
	// EXISTS passes over a view of the name, and writes then fail.
	var existing, kind string
	err := s.db.QueryRowContext(ctx, "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view', 'index') AND name = ? COLLATE NOCASE", name).Scan(&existing, &kind)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("ensure table %s: look up its name: %w", t.ID, err)
	case kind != "table":
		return fmt.Errorf("table %s: SQLite already holds %s named %q, not a table: %w; drop or rename it there, or exclude the table from the stream", t.ID, article(kind), existing, sink.ErrTableName)
	case existing != name:
		return fmt.Errorf("table %s: SQLite, which ignores case in names, already holds another source table under %q: %w; exclude one of them from the stream", t.ID, existing, sink.ErrTableName)
	}
	if s.claims == nil {
		s.claims = map[string]change.TableID{}
	}
	s.claims[folded] = t.ID
	return nil
}

// article is kind ("view", "index") with its indefinite article.
func article(kind string) string {
	if kind == "index" {
		return "an index"
	}
	return "a " + kind
}

// foldASCII lowers ASCII letters only, as SQLite does when it compares names.
func foldASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
