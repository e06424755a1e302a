package postgres

import (
	"testing"

	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/sink/sinktest"
)

func TestAlter(t *testing.T) {
	sinktest.RunAlter(t, func(t *testing.T) sink.Sink { return open(t, newDB(t)) })
}
