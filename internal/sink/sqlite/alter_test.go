package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

func TestAlter(t *testing.T) {
	sinktest.RunAlter(t, func(t *testing.T) sink.Sink {
		return open(t, filepath.Join(t.TempDir(), "sink.db"))
	})
}
