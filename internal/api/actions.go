package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/store"
)

// actionRecorder keeps what the audit trail records of a request that
// changes something: the start of its body (it is the request's body
// reader) and the status it was answered with (it is the response writer).
type actionRecorder struct {
	statusRecorder
	body io.ReadCloser
	seen bytes.Buffer
}

func (a *actionRecorder) Read(p []byte) (int, error) {
	n, err := a.body.Read(p)
	if room := store.MaxActionDetail - a.seen.Len(); room > 0 {
		a.seen.Write(p[:min(n, room)])
	}
	return n, err
}

func (a *actionRecorder) Close() error { return a.body.Close() }

// recordAction stores who asked what of the daemon and how it answered, in
// the audit trail: every authenticated request that may change something
// (pause, resume, reset, stop, rate changes, marks, reruns, initiations),
// refused ones included. A failure to record is logged, not answered: the
// action itself happened.
func (s *Server) recordAction(r *http.Request, pattern, who string, rec *actionRecorder) {
	detail := bytes.TrimSpace(rec.seen.Bytes())
	var compact bytes.Buffer
	if json.Compact(&compact, detail) == nil {
		detail = compact.Bytes()
	}
	a := &store.Action{Who: who, Action: pattern, Path: r.URL.Path, Status: rec.status, Detail: string(detail)}
	if a.Status == 0 {
		a.Status = http.StatusOK
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.st.RecordAction(ctx, a); err != nil {
		s.log.Error("record the action in the audit trail", "action", pattern, "who", who, logkey.Err(err))
	}
}
