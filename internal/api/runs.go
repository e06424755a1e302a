package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// getRun answers one run: several backfills initiated as one.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, _ string) error {
	return s.onRun(w, r, (*stream.Stream).GetRun)
}

// stopRun stops the members of a run still pending or active and answers
// the run as it is then.
func (s *Server) stopRun(w http.ResponseWriter, r *http.Request, _ string) error {
	return s.onRun(w, r, (*stream.Stream).StopRun)
}

// onRun applies act to the run the path names and answers the run. Under
// /api/v1/runs the run's own stream acts; under a stream's path (the
// deprecated alias) another stream's run is not found.
func (s *Server) onRun(w http.ResponseWriter, r *http.Request, act func(*stream.Stream, context.Context, int64) (stream.RunView, error)) error {
	id, err := pathID(r, "run")
	if err != nil {
		return err
	}
	var str *stream.Stream
	if name := r.PathValue("stream"); name != "" {
		str, err = s.streamNamed(name)
	} else {
		str, err = s.runStream(r.Context(), id)
	}
	if err != nil {
		return err
	}
	v, err := act(str, r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return unknownRun(id, str.Name())
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runView(v))
	return nil
}

// runStream is the stream run id belongs to.
func (s *Server) runStream(ctx context.Context, id int64) (*stream.Stream, error) {
	run, _, err := s.st.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unknownRun(id, "")
	}
	if err != nil {
		return nil, err
	}
	return s.streamNamed(run.Stream)
}

// unknownRun is the 404 of a run that does not exist (in streamName, when
// not empty).
func unknownRun(id int64, streamName string) *Error {
	todo := "`tidemark backfill list` names each backfill's run (RUN)"
	if streamName != "" {
		todo = fmt.Sprintf("`tidemark backfill list --stream %s` names each backfill's run (RUN)", streamName)
	}
	return unknownID("run", id, todo)
}
