package files

import (
	"bufio"
	"io"
	"path/filepath"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/event"
)

// FormatJSONL and FormatParquet are the file formats the destination
// writes (its format key); a data file's extension says its format.
const (
	FormatJSONL   = "jsonl"
	FormatParquet = "parquet"
)

// fileEvent is one event as a data file receives it: its JSON (what a
// JSONL file holds, line by line), and for formats that type each column,
// the table's shape and the values the event's before and after were
// encoded from.
type fileEvent struct {
	value []byte
	// head, for a format that encodesRows, stands for a chunk row's value,
	// whose length is size.
	head  *event.Head
	size  int
	table *change.Table
	// row is the row of a "c", "u" or "r" event, oldKey the key of a "d"
	// event's before.
	row    change.Row
	oldKey change.Key
}

// jsonSize is the length of the event's JSON.
func (e fileEvent) jsonSize() int64 {
	if e.head != nil {
		return int64(e.size)
	}
	return int64(len(e.value))
}

// fileFormat is the seam between the write path (temp files, fsync,
// rename, checkpoint), which every format shares, and the encoding of a
// file's events.
type fileFormat interface {
	ext() string
	// create starts a file's encoding into w.
	create(w *bufio.Writer) fileEncoder
	// encodesRows says the format encodes a row's values itself: a chunk's
	// rows come to it as the event's head and the row, without the JSON.
	encodesRows() bool
}

// fileEncoder encodes one data file's events.
type fileEncoder interface {
	// fits reports whether e can go into this file; when it cannot (a
	// Parquet file's schema does not describe it), the writer starts the
	// next file.
	fits(e fileEvent) bool
	write(e fileEvent) error
	// finish writes what ends the file (Parquet's footer) to the
	// buffered writer; the caller flushes and fsyncs.
	finish() error
}

func formatOf(name string) fileFormat {
	if name == FormatParquet {
		return parquetFormat{}
	}
	return jsonlFormat{}
}

// formatOfFile is a data file's format, by its extension.
func formatOfFile(path string) (fileFormat, bool) {
	for _, f := range []fileFormat{jsonlFormat{}, parquetFormat{}} {
		if filepath.Ext(path) == f.ext() {
			return f, true
		}
	}
	return nil, false
}

// jsonlFormat writes one event's JSON per line.
type jsonlFormat struct{}

func (jsonlFormat) ext() string { return ".jsonl" }

func (jsonlFormat) create(w *bufio.Writer) fileEncoder { return jsonlEncoder{w} }

func (jsonlFormat) encodesRows() bool { return false }

type jsonlEncoder struct{ w io.Writer }

func (jsonlEncoder) fits(fileEvent) bool { return true }

func (e jsonlEncoder) write(ev fileEvent) error {
	if _, err := e.w.Write(ev.value); err != nil {
		return err
	}
	_, err := e.w.Write([]byte{'\n'})
	return err
}

func (jsonlEncoder) finish() error { return nil }
