// Package files is the files destination: each stream's events
// (internal/event) as JSONL or Parquet files in a directory, in the layout Datastream
// writes to object storage — stream/schema.table/YYYY/MM/DD/HH/ — each
// batch's files written to temp names, fsynced, renamed, and only then the
// checkpoint, so that a replay after a crash neither loses nor duplicates
// an event (docs/destinations.md, "Files").
package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
	"github.com/tidemark/tidemark/internal/sink"
)

// DefaultMaxFileBytes is the size past which a table's events of one
// batch continue in the next file.
const DefaultMaxFileBytes = 64 << 20

// Sink writes event files of one format under one directory.
type Sink struct {
	dir      string
	maxBytes int64
	format   fileFormat
	enc      *event.Encoder
	now      func() time.Time
	streams  map[string]*streamState
	// afterRename, when set, runs after each file of a batch is renamed
	// into place (renamed of total so far); an error stops the batch
	// there, as a crash would.
	afterRename func(renamed, total int) error
	// Replays reads tables back by replaying their files (reader.go).
	sink.Replays[uint64]
}

type streamState struct {
	dir  string
	ckpt checkpointFile
}

// Open opens (creating it if needed) the directory JSONL files are
// written to.
func Open(dir string, maxBytes int64) (*Sink, error) { return OpenFormat(dir, FormatJSONL, maxBytes) }

// OpenFormat opens the directory files of a format (FormatJSONL or
// FormatParquet) are written to.
func OpenFormat(dir, format string, maxBytes int64) (*Sink, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("files destination %s: %w", dir, err)
	}
	s := &Sink{dir: dir, maxBytes: maxBytes, format: formatOf(format), now: time.Now, streams: map[string]*streamState{}, afterRename: killBetweenRenames()}
	s.Replays = sink.NewReplays("files destination", s.catchUp)
	return s, nil
}

// UseEncoder sets how changes become events: the stream gives the
// encoder of its source type (sink.EventWriter).
func (s *Sink) UseEncoder(e *event.Encoder) { s.enc = e }

// Close drops the replays reads held; every file is closed when its
// batch ends.
func (s *Sink) Close() error {
	s.Clear()
	return nil
}

// state loads a stream's checkpoint the first time the stream is named,
// removing what a batch that did not finish left behind.
func (s *Sink) state(stream string) (*streamState, error) {
	if st, ok := s.streams[stream]; ok {
		return st, nil
	}
	dir := filepath.Join(s.dir, escapeName(stream))
	c, err := readCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	if err := cleanLeftovers(dir, c.Seq); err != nil {
		return nil, fmt.Errorf("clean files of an unfinished batch in %s: %w", dir, err)
	}
	st := &streamState{dir: dir, ckpt: c}
	s.streams[stream] = st
	return st, nil
}

// Checkpoint reads the stream's committed position and cursors.
func (s *Sink) Checkpoint(_ context.Context, stream string) (sink.Checkpoint, error) {
	st, err := s.state(stream)
	if err != nil {
		return sink.Checkpoint{}, err
	}
	return st.ckpt.sink(), nil
}

// batchFiles collects one batch's writers, by table and kind.
type batchFiles struct {
	s        *Sink
	st       *streamState
	seq      uint64
	from, to change.LSN
	at       time.Time
	writers  map[writerKey]*fileWriter
	order    []writerKey
	manifest map[change.TableID][]manifestLine
}

type writerKey struct {
	table    change.TableID
	backfill int64
}

func (bf *batchFiles) writer(id change.TableID, backfill int64) *fileWriter {
	k := writerKey{id, backfill}
	if w, ok := bf.writers[k]; ok {
		return w
	}
	w := &fileWriter{
		dir:      hourDir(tableDir(bf.st.dir, id), bf.at),
		name:     func(part int) string { return fileName(bf.seq, bf.from, bf.to, backfill, part, bf.s.format.ext()) },
		format:   bf.s.format,
		maxBytes: bf.s.maxBytes,
	}
	bf.writers[k] = w
	bf.order = append(bf.order, k)
	return w
}

func (bf *batchFiles) abort() {
	for _, w := range bf.writers {
		w.abort()
	}
}

// Apply writes a batch's events, then its checkpoint. A crash before the
// checkpoint leaves files the next start removes; the stream then replays
// the batch from the checkpoint's position.
func (s *Sink) Apply(ctx context.Context, b *sink.Batch) error {
	if s.enc == nil {
		return errors.New("files destination: no event encoder was set")
	}
	st, err := s.state(b.Stream)
	if err != nil {
		return err
	}
	to := b.Position
	if to == 0 {
		to = change.LSN(st.ckpt.Position)
	}
	bf := &batchFiles{s: s, st: st, seq: st.ckpt.Seq + 1, from: change.LSN(st.ckpt.Position), to: to,
		at: s.now().UTC(), writers: map[writerKey]*fileWriter{}, manifest: map[change.TableID][]manifestLine{}}
	if err := s.write(ctx, bf, b); err != nil {
		bf.abort()
		return err
	}
	if err := s.publish(bf); err != nil {
		return err
	}
	next := st.ckpt.withBatch(bf.seq, b)
	if err := writeCheckpoint(st.dir, next); err != nil {
		return fmt.Errorf("files destination: write checkpoint: %w", err)
	}
	st.ckpt = next
	return nil
}

// write encodes the batch's operations into the batch's temp files.
func (s *Sink) write(ctx context.Context, bf *batchFiles, b *sink.Batch) error {
	for _, op := range b.Ops {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case op.Change != nil:
			msgs, err := s.enc.Change(op.Change, b.Origin(op, bf.at))
			if err != nil {
				return sink.Rejected(op.Change.Table.ID, err)
			}
			for _, m := range msgs {
				if m.Value == nil {
					continue // tombstones are for compacted logs
				}
				e := fileEvent{value: m.Value, table: op.Change.Table, row: op.Change.Row, oldKey: op.Change.OldKey}
				if err := bf.writer(m.Table, 0).add(e); err != nil {
					return fmt.Errorf("files destination: %w", err)
				}
			}
		case op.Chunk != nil:
			if err := s.writeChunk(bf, b, op.Chunk); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeChunk writes a chunk's rows as "r" events in a backfill file of
// their own, then its mark, and notes it for the table's manifest.
func (s *Sink) writeChunk(bf *batchFiles, b *sink.Batch, c *sink.Chunk) error {
	t := c.Table
	o := b.Origin(sink.Op{}, bf.at)
	w := bf.writer(t.ID, max(c.BackfillID, 1))
	var head *event.Head
	if s.format.encodesRows() {
		h, err := s.enc.RowHead(t, o)
		if err != nil {
			return sink.Rejected(t.ID, err)
		}
		head = &h
	}
	var after []byte
	for _, r := range c.Rows {
		e := fileEvent{head: head, table: t, row: r}
		if head != nil {
			// The JSON's length only, for max_file_bytes; its values are
			// checked as Row checks them.
			var err error
			if after, err = event.AppendRow(after[:0], t, r); err != nil {
				return sink.Rejected(t.ID, err)
			}
			e.size = head.Frame + len(after)
		} else {
			m, err := s.enc.Row(t, r, o)
			if err != nil {
				return sink.Rejected(t.ID, err)
			}
			e.value = m.Value
		}
		if err := w.add(e); err != nil {
			return fmt.Errorf("files destination: %w", err)
		}
	}
	mark, err := s.enc.Chunk(t, event.ChunkMark{BackfillID: c.BackfillID, Low: c.Low, High: c.High,
		Rows: len(c.Rows), Reset: !c.Keep, Last: c.Last}, o)
	if err != nil {
		return sink.Rejected(t.ID, err)
	}
	if err := w.add(fileEvent{value: mark.Value, table: t}); err != nil {
		return fmt.Errorf("files destination: %w", err)
	}
	var bounds struct {
		Chunk struct {
			Low  json.RawMessage `json:"low"`
			High json.RawMessage `json:"high"`
		} `json:"chunk"`
	}
	if err := json.Unmarshal(mark.Value, &bounds); err != nil {
		return err
	}
	bf.manifest[t.ID] = append(bf.manifest[t.ID], manifestLine{Seq: bf.seq, Backfill: c.BackfillID,
		Low: bounds.Chunk.Low, High: bounds.Chunk.High, Rows: len(c.Rows), Reset: !c.Keep, Last: c.Last})
	return nil
}

// publish syncs every file of the batch, renames them to their names,
// and appends the manifests' lines.
func (s *Sink) publish(bf *batchFiles) error {
	for _, k := range bf.order {
		if err := bf.writers[k].close(); err != nil {
			bf.abort()
			return fmt.Errorf("files destination: %w", err)
		}
	}
	published := map[change.TableID][]string{}
	total, renamed := 0, 0
	for _, w := range bf.writers {
		total += len(w.done)
	}
	onRename := func() error {
		renamed++
		if s.afterRename == nil {
			return nil
		}
		return s.afterRename(renamed, total)
	}
	for _, k := range bf.order {
		w := bf.writers[k]
		paths, err := w.publish(onRename)
		if err != nil {
			return fmt.Errorf("files destination: %w", err)
		}
		if k.backfill != 0 {
			for _, p := range paths {
				rel, _ := filepath.Rel(tableDir(bf.st.dir, k.table), p)
				published[k.table] = append(published[k.table], rel)
			}
		}
	}
	for id, lines := range bf.manifest {
		// A chunk goes alone in its batch, so the batch's backfill files
		// are its files.
		for i := range lines {
			lines[i].Files = published[id]
		}
		if err := appendManifest(filepath.Join(tableDir(bf.st.dir, id), manifestName), lines); err != nil {
			return fmt.Errorf("files destination: manifest: %w", err)
		}
	}
	return nil
}
