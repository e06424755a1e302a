// Package all links every destination type into a program: import it for
// its registrations (see internal/sink's registry).
package all

import (
	_ "github.com/tidemark/tidemark/internal/sink/files"    // JSONL or Parquet event files
	_ "github.com/tidemark/tidemark/internal/sink/kafka"    // Kafka topics
	_ "github.com/tidemark/tidemark/internal/sink/nats"     // NATS JetStream
	_ "github.com/tidemark/tidemark/internal/sink/postgres" // PostgreSQL
	_ "github.com/tidemark/tidemark/internal/sink/sqlite"   // SQLite
)
