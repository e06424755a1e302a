package sink

import (
	"encoding/json"
	"fmt"

	"github.com/tidemark/tidemark/internal/change"
)

// keyValue is one key value in a cursor's stored JSON form.
type keyValue struct {
	T string `json:"t"`
	N bool   `json:"n"`
}

// MarshalKey renders a cursor key as a JSON array for a destination's
// cursor table; a nil key (no chunk applied yet) is nil.
func MarshalKey(k change.Key) ([]byte, error) {
	if k == nil {
		return nil, nil
	}
	vs := make([]keyValue, len(k))
	for i, v := range k {
		vs[i] = keyValue{T: v.Text, N: v.Null}
	}
	return json.Marshal(vs)
}

// UnmarshalKey reads what MarshalKey wrote; nil gives a nil key.
func UnmarshalKey(b []byte) (change.Key, error) {
	if b == nil {
		return nil, nil
	}
	var vs []keyValue
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, fmt.Errorf("decode cursor key: %w", err)
	}
	k := make(change.Key, len(vs))
	for i, v := range vs {
		if v.N {
			k[i] = change.Null
		} else {
			k[i] = change.Text(v.T)
		}
	}
	return k, nil
}

// AddCursor records a cursor read back from a destination's cursor table,
// its after key still in MarshalKey's form (nil for none).
func (cp *Checkpoint) AddCursor(id change.TableID, c Cursor, after []byte) error {
	var err error
	if c.After, err = UnmarshalKey(after); err != nil {
		return fmt.Errorf("cursor of %s: %w", id, err)
	}
	if cp.Cursors == nil {
		cp.Cursors = make(map[change.TableID]Cursor)
	}
	cp.Cursors[id] = c
	return nil
}
