package files

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// manifestName is a table's backfill manifest: one line per backfill
// chunk written, naming its file and key range, so a reader finds a
// backfill's files without reading them.
const manifestName = "_backfills.jsonl"

type manifestLine struct {
	Seq      uint64          `json:"seq"`
	Backfill int64           `json:"backfill"`
	Files    []string        `json:"files"` // relative to the table's directory
	Low      json.RawMessage `json:"low"`
	High     json.RawMessage `json:"high"`
	Rows     int             `json:"rows"`
	Reset    bool            `json:"reset"`
	Last     bool            `json:"last,omitempty"`
}

// appendManifest adds lines to a table's manifest and fsyncs it. A crash
// after it and before the checkpoint leaves lines of a batch after the
// checkpoint's, which trimManifest removes at start.
func appendManifest(path string, lines []manifestLine) error {
	var buf bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// trimManifest rewrites a manifest without the lines of batches after
// committed (and a last line cut short by a crash).
func trimManifest(path string, committed uint64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var keep bytes.Buffer
	changed := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l manifestLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Seq > committed {
			changed = true
			continue
		}
		keep.Write(sc.Bytes())
		keep.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if !changed {
		return nil
	}
	return writeDurably(path, keep.Bytes())
}
