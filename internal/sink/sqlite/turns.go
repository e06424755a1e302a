package sqlite

import (
	"context"
	"path/filepath"
	"sync"
)

// The sinks of one process that write the same file take turns, one write
// transaction each, in the order they asked. SQLite alone does not make
// them: a connection that finds the file locked polls (its busy handler
// sleeps up to 100 ms between tries), and one that commits and begins again
// at once holds the lock nearly all the time, so the other waits out its
// busy timeout again and again ("database is locked"). Writers in other
// processes still meet the busy timeout.

// turns holds a turn per file written by an open sink, by absolute path.
var turns = struct {
	sync.Mutex
	files map[string]*fileTurn
}{files: map[string]*fileTurn{}}

// fileTurn is one file's turn: a sink holds it while its token is in the
// channel. The channel's waiting senders are served first in, first out.
type fileTurn struct {
	key   string
	token chan struct{}
	users int
}

// joinTurns returns the turn of the file at path, for a sink that opens it;
// leave gives it back when the sink closes.
func joinTurns(path string) *fileTurn {
	key := fileKey(path)
	turns.Lock()
	defer turns.Unlock()
	t := turns.files[key]
	if t == nil {
		t = &fileTurn{key: key, token: make(chan struct{}, 1)}
		turns.files[key] = t
	}
	t.users++
	return t
}

// fileKey names the file at path as every path to it does: absolute, with
// symbolic links resolved, the directory's alone while the file does not
// exist yet (the first sink creates it).
func fileKey(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

func (t *fileTurn) leave() {
	turns.Lock()
	defer turns.Unlock()
	if t.users--; t.users == 0 {
		delete(turns.files, t.key)
	}
}

// take waits for the turn, or for ctx to end.
func (t *fileTurn) take(ctx context.Context) error {
	select {
	case t.token <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *fileTurn) give() { <-t.token }

// inTurn runs a write of s's in its file's turn.
func (s *Sink) inTurn(ctx context.Context, write func() error) error {
	if err := s.turn.take(ctx); err != nil {
		return err
	}
	defer s.turn.give()
	return write()
}
