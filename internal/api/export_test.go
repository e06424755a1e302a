package api

import (
	"log/slog"
	"net/http"

	"github.com/tidemark/tidemark/internal/config"
)

// HandleForTest registers a route as the server's own are (a role, error
// rendering), for tests of what every route goes through.
func (s *Server) HandleForTest(pattern string, need config.Role, h func(http.ResponseWriter, *http.Request) error) {
	s.handle(pattern, need, func(w http.ResponseWriter, r *http.Request, _ string) error { return h(w, r) })
}

// SetLogForTest replaces the server's logger.
func (s *Server) SetLogForTest(log *slog.Logger) { s.log = log }
