package files

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/tidemark/tidemark/internal/sink"
)

var _ sink.ReplayReader = (*Sink)(nil)

// catchUp brings a table's replay up to the stream's checkpoint (reads
// of the embedded sink.Replays: ReadRange and ReadKeys replay the
// committed files not replayed by an earlier read, in the order they were
// written): At is the last batch whose files it applied.
func (s *Sink) catchUp(_ context.Context, r *sink.Replay[uint64]) error {
	_, st, err := sink.OnlyStream(s.streams)
	if err != nil {
		return err
	}
	paths, err := filesAfter(tableDir(st.dir, r.Table.ID), r.At, st.ckpt.Seq)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := replayFile(r.Reader.Part(0), p, nil); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}
	r.At = st.ckpt.Seq
	return nil
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
