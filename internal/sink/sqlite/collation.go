package sqlite

import (
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/collate"

	sqlitedriver "modernc.org/sqlite"
)

// Text keys under a source collation that is not bytewise (MariaDB's
// utf8mb4_general_ci, latin1_swedish_ci, …) are declared with a collation
// registered on the driver that compares like the source (package
// collate): the primary key then makes keys the source calls equal one
// row, and range comparisons put in a chunk's range the keys the source
// puts there. Another SQLite client must register a collation of the same
// name to write these tables or to search them by key.
func init() {
	for _, name := range collate.Names() {
		c := collate.Lookup(name)
		sqlitedriver.MustRegisterCollationUtf8(collationName(name), c.Compare)
	}
}

// collationName is the SQLite collation reproducing a source collation.
func collationName(source string) string { return "tidemark_" + source }

// sourceCollation returns the SQLite collation a key column is declared
// with, "" when it compares bytewise (or is not text); ok is false when
// SQLite cannot compare it like the source.
func sourceCollation(c change.Column) (name string, ok bool) {
	if change.TagOf(c) != change.TagText {
		return "", false
	}
	// Only another source's collation names: a PostgreSQL collation is a
	// locale, which the names in package collate are not. MySQL's _bin
	// collations are there too (PAD SPACE, latin1's bytes).
	if c.Native != "" && collate.Lookup(c.Collation) != nil {
		return collationName(c.Collation), true
	}
	return "", c.ByteOrder
}
