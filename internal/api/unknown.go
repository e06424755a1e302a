package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
	"github.com/tidemark/tidemark/internal/suggest"
)

// Unknown is a name a request gave that does not exist, in a 404's body
// (error.unknown): what kind of thing it is (stream, object, backfill,
// run, task, batch_backfill, instance), the name as given, the stream an
// object was looked for in, and the existing names closest to it.
type Unknown struct {
	Kind        string   `json:"kind"`
	Name        string   `json:"name"`
	Stream      string   `json:"stream,omitempty"`
	Suggestions []string `json:"suggestions"`
}

// notFound is the 404 of unknown names: the message says, for each, that
// it does not exist and what it may have been meant to be, then what to
// do.
func notFound(todo string, unknown ...Unknown) *Error {
	msgs := make([]string, len(unknown))
	hinted := false
	for i, u := range unknown {
		if u.Suggestions == nil {
			unknown[i].Suggestions = []string{}
		}
		name, where := u.Name, ""
		if u.Kind == "stream" {
			name = strconv.Quote(name)
		}
		if u.Stream != "" {
			where = " in stream " + u.Stream
		}
		msgs[i] = fmt.Sprintf("no %s %s%s%s", strings.ReplaceAll(u.Kind, "_", " "), name, where, suggest.Hint(u.Suggestions))
		hinted = hinted || len(u.Suggestions) > 0
	}
	msg := strings.Join(msgs, "; ")
	switch {
	case todo == "":
	case hinted:
		msg += " (" + todo + ")"
	default:
		msg += ": " + todo
	}
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: msg, Unknown: unknown}
}

// unknownStream is the 404 of a stream name that is not configured.
func (s *Server) unknownStream(name string) *Error {
	todo := "the configured streams are " + strings.Join(s.names, ", ")
	if len(s.names) == 0 {
		todo = "no stream is configured"
	}
	return notFound(todo,
		Unknown{Kind: "stream", Name: name, Suggestions: suggest.Closest(name, s.names)})
}

// unknownID is the 404 of an id (of a backfill, a run, …) that does not
// exist; todo says where to find the existing ones.
func unknownID(kind string, id int64, todo string) *Error {
	return notFound(todo, Unknown{Kind: kind, Name: strconv.FormatInt(id, 10), Suggestions: []string{}})
}

// checkObjects returns nil when every one of ids is an object of str, a
// 404 naming the ones that are not (with the closest objects) otherwise,
// or, when the stream is not running and so may not know its objects yet,
// a 409 that says why it is not.
func (s *Server) checkObjects(ctx context.Context, str *stream.Stream, ids []change.TableID) error {
	objs, err := s.st.ListObjects(ctx, str.Name())
	if err != nil {
		return err
	}
	known := make([]string, len(objs))
	for i, o := range objs {
		known[i] = config.FormatTable(change.TableID{Schema: o.Schema, Name: o.Table})
	}
	var unknown []Unknown
	for _, id := range ids {
		name := config.FormatTable(id)
		if !slices.Contains(known, name) {
			unknown = append(unknown, Unknown{Kind: "object", Name: name, Stream: str.Name(), Suggestions: suggest.Closest(name, known)})
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	if e := streamDown(str); e != nil {
		return e
	}
	return notFound(fmt.Sprintf("`tidemark objects %s` lists them", str.Name()), unknown...)
}

// streamDown is the 409 of a stream that is not running for a reason of
// its own (failed, retrying, starting), nil for a running or paused one.
func streamDown(str *stream.Stream) *Error {
	st := str.State()
	switch st.State {
	case store.StateFailed, store.StateRetrying, store.StateStarting:
	default:
		return nil
	}
	msg, then := fmt.Sprintf("stream %s is %s", str.Name(), st.State), "it tries again by itself"
	if st.State == store.StateFailed {
		msg, then = "stream "+str.Name()+" failed", "after fixing the cause: tidemark stream resume "+str.Name()
	}
	if st.Reason != "" {
		msg += ": " + st.Reason
	}
	return &Error{Status: http.StatusConflict, Code: "not_running",
		Message: fmt.Sprintf("%s; its objects are known once it runs (%s)", msg, then)}
}

// checkListed is, for a listing of backfills that came out empty, the 404
// of the stream or object its filter names when that does not exist:
// neither configured nor in any record.
func (s *Server) checkListed(ctx context.Context, f store.BackfillFilter) error {
	var object []change.TableID
	if f.Table != "" {
		object = []change.TableID{{Schema: f.Schema, Name: f.Table}}
	}
	if f.Stream != "" {
		str, ok := s.streams[f.Stream]
		if !ok {
			return s.unknownStream(f.Stream)
		}
		return s.checkObjects(ctx, str, object)
	}
	if object == nil {
		return nil
	}
	var known []string
	for _, n := range s.names {
		objs, err := s.st.ListObjects(ctx, n)
		if err != nil {
			return err
		}
		for _, o := range objs {
			known = append(known, config.FormatTable(change.TableID{Schema: o.Schema, Name: o.Table}))
		}
	}
	name := config.FormatTable(object[0])
	if slices.Contains(known, name) {
		return nil
	}
	return notFound("name an object of a stream (tidemark objects STREAM)", Unknown{Kind: "object", Name: name, Suggestions: suggest.Closest(name, known)})
}
