package config_test

// The configuration knows source and destination types through the kinds
// their packages register: link them all, as a program does.
import (
	_ "github.com/tidemark/tidemark/internal/sink/all"
	_ "github.com/tidemark/tidemark/internal/source/all"
)
