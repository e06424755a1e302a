// Package all links every source type into a program: import it for its
// registrations (see internal/source's registry).
package all

import (
	_ "github.com/tidemark/tidemark/internal/source/mysql" // MySQL and MariaDB
	_ "github.com/tidemark/tidemark/internal/source/pg"    // PostgreSQL
)
