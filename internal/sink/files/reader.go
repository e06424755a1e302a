package files

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

var _ sink.ReplayReader = (*Sink)(nil)

// ReadRange reads a table's rows in (low, high] by replaying its files
// (sink.Reader): the committed files not replayed by an earlier read, in
// the order they were written, then the range of what they left.
func (s *Sink) ReadRange(ctx context.Context, t *change.Table, low, high change.Key) ([]change.Row, error) {
	tr, err := s.replay(t)
	if err != nil {
		return nil, err
	}
	return tr.Reader.ReadRange(low, high)
}

// ReadKeys reads the rows of a table with the given keys, as ReadRange.
func (s *Sink) ReadKeys(ctx context.Context, t *change.Table, keys []change.Key) ([]change.Row, error) {
	tr, err := s.replay(t)
	if err != nil {
		return nil, err
	}
	return tr.Reader.ReadKeys(keys)
}

// EndReads drops a table's replay (sink.ReplayReader).
func (s *Sink) EndReads(id change.TableID) { s.reads.Drop(id) }

// replay brings a table's replay up to the stream's checkpoint: At is the
// last batch whose files it applied.
func (s *Sink) replay(t *change.Table) (*sink.Replay[uint64], error) {
	st, err := s.readStream()
	if err != nil {
		return nil, err
	}
	tr, err := s.reads.Get(t)
	if err != nil {
		return nil, fmt.Errorf("files destination: %w", err)
	}
	paths, err := filesAfter(tableDir(st.dir, t.ID), tr.At, st.ckpt.Seq)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if err := replayFile(tr.Reader.Part(0), p); err != nil {
			s.reads.Drop(t.ID) // half a file applied: replay again next time
			return nil, fmt.Errorf("files destination: replay: %w", err)
		}
	}
	tr.At = st.ckpt.Seq
	return tr, nil
}

// readStream is the one stream whose files reads replay: the stream the
// sink was opened for.
func (s *Sink) readStream() (*streamState, error) {
	if len(s.streams) != 1 {
		return nil, fmt.Errorf("files destination: a read needs the one stream the destination serves; it has %d", len(s.streams))
	}
	for _, st := range s.streams {
		return st, nil
	}
	return nil, nil
}

// filesAfter lists a table's data files of the batches after seq up to
// upto, the committed ones, in the order they were written.
func filesAfter(root string, seq, upto uint64) ([]string, error) {
	type dataFile struct{ name, path string }
	var data []dataFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n, ok := seqOf(d.Name()); ok && !d.IsDir() && n > seq && n <= upto {
			data = append(data, dataFile{d.Name(), path})
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	sort.Slice(data, func(i, j int) bool { return data[i].name < data[j].name })
	out := make([]string, len(data))
	for i, f := range data {
		out[i] = f.path
	}
	return out, nil
}
