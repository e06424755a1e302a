package files

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// ReadTable is the reader of a files destination: it replays a table's
// files in the order they were written into the reference consumer, which
// then holds the table as a consumer of the files would. A file being
// written (a temp name) and files of a batch after the stream's
// checkpoint are not read: they are not committed. Each watch sees the
// events as they are replayed.
func ReadTable(dir, stream string, t *change.Table, watch ...event.Watch) (*event.Replica, error) {
	streamDir := filepath.Join(dir, escapeName(stream))
	c, err := readCheckpoint(streamDir)
	if err != nil {
		return nil, err
	}
	type dataFile struct{ name, path string }
	var data []dataFile
	root := tableDir(streamDir, t.ID)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if seq, ok := seqOf(d.Name()); ok && !d.IsDir() && seq <= c.Seq {
			data = append(data, dataFile{d.Name(), path})
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	sort.Slice(data, func(i, j int) bool { return data[i].name < data[j].name })
	keyCols := make([]string, len(t.Key))
	for i, kc := range t.KeyColumns() {
		keyCols[i] = kc.Name
	}
	r := event.NewReplica(keyCols)
	for _, f := range data {
		if err := replayFile(r, f.path, watch); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// replayFile applies a data file's events, each seen by the watches
// first; its extension says its format.
func replayFile(r *event.Replica, path string, watch []event.Watch) error {
	apply := func(value []byte) error {
		for _, w := range watch {
			w(value)
		}
		return r.Apply(value)
	}
	if filepath.Ext(path) == (parquetFormat{}).ext() {
		return parquetEvents(path, apply)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for line := 1; sc.Scan(); line++ {
		if err := apply(sc.Bytes()); err != nil {
			return fmt.Errorf("%s line %d: %w", path, line, err)
		}
	}
	return sc.Err()
}
