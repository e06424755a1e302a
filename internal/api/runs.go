package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// getRun answers one run of a stream: several backfills initiated as one.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, _ string) error {
	return s.onRun(w, r, (*stream.Stream).GetRun)
}

// stopRun stops the members of a run still pending or active and answers
// the run as it is then.
func (s *Server) stopRun(w http.ResponseWriter, r *http.Request, _ string) error {
	return s.onRun(w, r, (*stream.Stream).StopRun)
}

// onRun applies act to the run the path names and answers the run.
func (s *Server) onRun(w http.ResponseWriter, r *http.Request, act func(*stream.Stream, context.Context, int64) (stream.RunView, error)) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	id, err := pathID(r, "run")
	if err != nil {
		return err
	}
	v, err := act(str, r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return unknownID("run", id, fmt.Sprintf("`tidemark backfill list --stream %s` names each backfill's run", str.Name()))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
