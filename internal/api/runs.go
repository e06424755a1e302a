package api

import (
	"net/http"
	"strconv"
)

// runID reads a run id from the path.
func runID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("run id %q is not a positive number", r.PathValue("id"))
	}
	return id, nil
}

// getRun answers one run of a stream: several backfills initiated as one.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, _ string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	id, err := runID(r)
	if err != nil {
		return err
	}
	v, err := str.GetRun(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// stopRun stops the members of a run still pending or active and answers
// the run as it is then.
func (s *Server) stopRun(w http.ResponseWriter, r *http.Request, _ string) error {
	str, err := s.stream(r)
	if err != nil {
		return err
	}
	id, err := runID(r)
	if err != nil {
		return err
	}
	v, err := str.StopRun(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
