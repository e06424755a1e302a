package sink

import (
	"encoding/json"
	"sort"

	"github.com/tidemark/tidemark/internal/change"
)

// CursorRecord is a backfill cursor as a destination that keeps its
// checkpoint as one JSON value stores it (Kafka's checkpoint topic, NATS's
// key-value bucket).
type CursorRecord struct {
	Schema     string          `json:"schema"`
	Table      string          `json:"table"`
	BackfillID int64           `json:"backfill_id"`
	After      json.RawMessage `json:"after,omitempty"` // MarshalKey's form
	Done       bool            `json:"done,omitempty"`
	Rows       int64           `json:"rows"`
}

// CursorRecords are c's cursors as records, by table name.
func (c Checkpoint) CursorRecords() ([]CursorRecord, error) {
	var out []CursorRecord
	for id, cur := range c.Cursors {
		after, err := MarshalKey(cur.After)
		if err != nil {
			return nil, err
		}
		out = append(out, CursorRecord{Schema: id.Schema, Table: id.Name, BackfillID: cur.BackfillID,
			After: after, Done: cur.Done, Rows: cur.Rows})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Schema < b.Schema || a.Schema == b.Schema && a.Table < b.Table
	})
	return out, nil
}

// AddCursorRecords adds the cursors CursorRecords wrote.
func (c *Checkpoint) AddCursorRecords(rs []CursorRecord) error {
	for _, r := range rs {
		var after []byte
		if len(r.After) > 0 && string(r.After) != "null" {
			after = r.After
		}
		cur := Cursor{BackfillID: r.BackfillID, Done: r.Done, Rows: r.Rows}
		if err := c.AddCursor(change.TableID{Schema: r.Schema, Name: r.Table}, cur, after); err != nil {
			return err
		}
	}
	return nil
}
