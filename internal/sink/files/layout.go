package files

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/change"
)

// A data file's name says which batch wrote it and which source positions
// it holds (docs/destinations.md, "Files"):
//
//	<seq>_<from>-<to>[_backfill-<id>]_<part>.<jsonl|parquet>
//
// seq is the batch's number (12 digits, so names sort by it), from and to
// the positions before and after the batch (16 hex digits), part the
// file's number within the batch for its table. A file being written is
// ".<name>.tmp" beside it.
const seqDigits = 12

func fileName(seq uint64, from, to change.LSN, backfill int64, part int, ext string) string {
	kind := ""
	if backfill != 0 {
		kind = fmt.Sprintf("_backfill-%d", backfill)
	}
	return fmt.Sprintf("%0*d_%016x-%016x%s_%03d%s", seqDigits, seq, uint64(from), uint64(to), kind, part, ext)
}

// seqOf reads the batch number of a data file's name; false for other
// files.
func seqOf(name string) (uint64, bool) {
	if _, ok := formatOfFile(name); !ok || len(name) < seqDigits+1 || name[seqDigits] != '_' {
		return 0, false
	}
	n, err := strconv.ParseUint(name[:seqDigits], 10, 64)
	return n, err == nil
}

// tableDir is a table's directory: schema and table name, each escaped so
// that no name can leave the stream's directory or collide with another.
func tableDir(streamDir string, id change.TableID) string {
	return filepath.Join(streamDir, escapeName(id.Schema)+"."+escapeName(id.Name))
}

func escapeName(s string) string {
	e := url.PathEscape(s)
	// PathEscape keeps '.', which would let "." and ".." through, and
	// the separator between schema and table.
	return strings.ReplaceAll(e, ".", "%2E")
}

// hourDir is where a batch written at t puts a table's files.
func hourDir(table string, t time.Time) string {
	return filepath.Join(table, t.Format("2006"), t.Format("01"), t.Format("02"), t.Format("15"))
}

// writeDurably writes a file under its final name atomically: a temp file
// beside it, fsynced, renamed, and the directory fsynced.
func writeDurably(path string, data []byte) error {
	tmp := tempName(path)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func tempName(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// cleanLeftovers removes what a batch that did not finish left behind:
// temp files, data files of batches after the checkpoint's, and their
// lines in the backfill manifests.
func cleanLeftovers(streamDir string, committed uint64) error {
	err := filepath.WalkDir(streamDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		switch {
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp"):
			return os.Remove(path)
		case name == manifestName:
			return trimManifest(path, committed)
		}
		if seq, ok := seqOf(name); ok && seq > committed {
			return os.Remove(path)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// fileWriter writes one table's events of one batch and kind into numbered
// temp files in its format, starting the next when one passes maxBytes
// (counted in the events' JSON size, whatever the format) or when the
// format cannot take an event into the current file.
type fileWriter struct {
	dir      string
	name     func(part int) string
	format   fileFormat
	maxBytes int64
	part     int
	f        *os.File
	w        *bufio.Writer
	enc      fileEncoder
	size     int64
	done     []string // temp files written and synced, in order
}

func (fw *fileWriter) add(e fileEvent) error {
	if fw.f != nil && fw.size > 0 && (fw.size+e.jsonSize()+1 > fw.maxBytes || !fw.enc.fits(e)) {
		if err := fw.close(); err != nil {
			return err
		}
	}
	if fw.f == nil {
		if err := os.MkdirAll(fw.dir, 0o755); err != nil {
			return err
		}
		fw.part++
		f, err := os.OpenFile(tempName(filepath.Join(fw.dir, fw.name(fw.part))), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fw.f, fw.w, fw.size = f, bufio.NewWriterSize(f, 256<<10), 0
		fw.enc = fw.format.create(fw.w)
	}
	fw.size += e.jsonSize() + 1
	return fw.enc.write(e)
}

// close ends, flushes, fsyncs and closes the current file.
func (fw *fileWriter) close() error {
	if fw.f == nil {
		return nil
	}
	f := fw.f
	fw.f = nil
	if err := fw.enc.finish(); err != nil {
		f.Close()
		return err
	}
	if err := fw.w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	fw.done = append(fw.done, f.Name())
	return f.Close()
}

// abort removes the writer's temp files.
func (fw *fileWriter) abort() {
	if fw.f != nil {
		fw.f.Close()
		fw.done = append(fw.done, fw.f.Name())
		fw.f = nil
	}
	for _, p := range fw.done {
		os.Remove(p)
	}
}

// publish renames the synced temp files to their names and fsyncs the
// directory; it returns the final paths. afterRename runs after each
// rename (a test's crash point).
func (fw *fileWriter) publish(afterRename func() error) ([]string, error) {
	var out []string
	for _, tmp := range fw.done {
		base := filepath.Base(tmp)
		final := filepath.Join(filepath.Dir(tmp), strings.TrimSuffix(strings.TrimPrefix(base, "."), ".tmp"))
		if err := os.Rename(tmp, final); err != nil {
			return out, err
		}
		out = append(out, final)
		if err := afterRename(); err != nil {
			return out, err
		}
	}
	if len(fw.done) > 0 {
		if err := syncDir(fw.dir); err != nil {
			return out, err
		}
	}
	return out, nil
}
