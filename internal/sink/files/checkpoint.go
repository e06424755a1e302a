package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/sink"
)

// checkpointFile is what a stream's checkpoint holds: the number of the
// last batch whose files are all in place, its source position and resume
// token, and the backfill cursors. Files of a later batch are leftovers
// of one that did not finish, removed at start.
type checkpointFile struct {
	Seq      uint64         `json:"seq"`
	Position uint64         `json:"position"`
	Resume   string         `json:"resume,omitempty"`
	Cursors  []cursorRecord `json:"cursors,omitempty"`
}

type cursorRecord struct {
	Schema     string    `json:"schema"`
	Table      string    `json:"table"`
	BackfillID int64     `json:"backfill_id"`
	After      []*string `json:"after"` // nil entries are NULLs
	Done       bool      `json:"done,omitempty"`
	Rows       int64     `json:"rows"`
}

func checkpointPath(streamDir string) string {
	return filepath.Join(streamDir, "_tidemark", "checkpoint.json")
}

// readCheckpoint reads a stream's checkpoint; a stream that never
// committed has the zero one.
func readCheckpoint(streamDir string) (checkpointFile, error) {
	var c checkpointFile
	b, err := os.ReadFile(checkpointPath(streamDir))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("checkpoint %s: %w (the file is damaged: restore it or reset the stream)", checkpointPath(streamDir), err)
	}
	return c, nil
}

// writeCheckpoint replaces the checkpoint atomically and durably: a temp
// file, fsynced, renamed over the old one, and the directory fsynced.
func writeCheckpoint(streamDir string, c checkpointFile) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	p := checkpointPath(streamDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("checkpoint directory: %w", err)
	}
	return writeDurably(p, b)
}

func (c checkpointFile) sink() sink.Checkpoint {
	out := sink.Checkpoint{Position: change.LSN(c.Position), Resume: c.Resume}
	if len(c.Cursors) > 0 {
		out.Cursors = map[change.TableID]sink.Cursor{}
	}
	for _, r := range c.Cursors {
		cur := sink.Cursor{BackfillID: r.BackfillID, Done: r.Done, Rows: r.Rows}
		if r.After != nil {
			cur.After = make(change.Key, len(r.After))
			for i, v := range r.After {
				if v == nil {
					cur.After[i] = change.Null
				} else {
					cur.After[i] = change.Text(*v)
				}
			}
		}
		out.Cursors[change.TableID{Schema: r.Schema, Name: r.Table}] = cur
	}
	return out
}

// withBatch is the checkpoint after a batch: its position, and its
// cursors merged in (BackfillID 0 removes a table's cursor).
func (c checkpointFile) withBatch(seq uint64, b *sink.Batch) checkpointFile {
	next := checkpointFile{Seq: seq, Position: uint64(b.Position), Resume: b.Resume}
	if b.Position == 0 {
		next.Position, next.Resume = c.Position, c.Resume
	}
	byTable := map[change.TableID]cursorRecord{}
	for _, r := range c.Cursors {
		byTable[change.TableID{Schema: r.Schema, Name: r.Table}] = r
	}
	for id, cur := range b.Cursors {
		if cur.BackfillID == 0 {
			delete(byTable, id)
			continue
		}
		r := cursorRecord{Schema: id.Schema, Table: id.Name, BackfillID: cur.BackfillID, Done: cur.Done, Rows: cur.Rows}
		if cur.After != nil {
			r.After = make([]*string, len(cur.After))
			for i, v := range cur.After {
				if !v.Null {
					t := v.Text
					r.After[i] = &t
				}
			}
		}
		byTable[id] = r
	}
	for _, r := range byTable {
		next.Cursors = append(next.Cursors, r)
	}
	sort.Slice(next.Cursors, func(i, j int) bool {
		a, b := next.Cursors[i], next.Cursors[j]
		return a.Schema < b.Schema || a.Schema == b.Schema && a.Table < b.Table
	})
	return next
}
