package pg

import (
	"fmt"
	"strconv"
	"strings"
)

// Snapshot is a PostgreSQL MVCC snapshot as pg_current_snapshot() prints it:
// transactions below Xmin are finished, those at or above Xmax had not
// started, and Xip lists those in progress between the two. Ids are 64-bit
// (epoch and xid); the log carries 32-bit xids, see Widen.
type Snapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64
}

// ParseSnapshot reads the "xmin:xmax:xip,…" text form.
func ParseSnapshot(s string) (Snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Snapshot{}, fmt.Errorf("parse snapshot %q: want xmin:xmax:xip", s)
	}
	var snap Snapshot
	var err error
	if snap.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("parse snapshot xmin %q: %w", parts[0], err)
	}
	if snap.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return Snapshot{}, fmt.Errorf("parse snapshot xmax %q: %w", parts[1], err)
	}
	if snap.Xmin > snap.Xmax {
		return Snapshot{}, fmt.Errorf("parse snapshot %q: xmin above xmax", s)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			id, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return Snapshot{}, fmt.Errorf("parse snapshot xip %q: %w", x, err)
			}
			if id < snap.Xmin || id >= snap.Xmax {
				return Snapshot{}, fmt.Errorf("parse snapshot %q: in-progress id %d outside [xmin, xmax)", s, id)
			}
			snap.Xip = append(snap.Xip, id)
		}
	}
	return snap, nil
}

// Visible reports whether a committed transaction's effects are visible in
// the snapshot.
func (s Snapshot) Visible(xid uint64) bool {
	if xid < s.Xmin {
		return true
	}
	if xid >= s.Xmax {
		return false
	}
	for _, x := range s.Xip {
		if x == xid {
			return false
		}
	}
	return true
}

// Widen turns a 32-bit xid from the log into the 64-bit id nearest to the
// snapshot's xmax. PostgreSQL keeps every live xid within 2^31 of the next
// one, so the nearest candidate is the right one.
func (s Snapshot) Widen(xid uint32) uint64 {
	ref := s.Xmax
	c := ref&^0xFFFFFFFF | uint64(xid)
	const half = 1 << 31
	switch {
	case c > ref+half && c >= 1<<32:
		c -= 1 << 32
	case c+half < ref:
		c += 1 << 32
	}
	return c
}

func (s Snapshot) String() string {
	xs := make([]string, len(s.Xip))
	for i, x := range s.Xip {
		xs[i] = strconv.FormatUint(x, 10)
	}
	return fmt.Sprintf("%d:%d:%s", s.Xmin, s.Xmax, strings.Join(xs, ","))
}

// VisibleXid reports whether the committed transaction with the log's
// 32-bit xid is visible in the snapshot.
func (s Snapshot) VisibleXid(xid uint32) bool { return s.Visible(s.Widen(xid)) }

// Horizon is the snapshot's xmin: every transaction below it is finished
// for this snapshot and for every one taken after it.
func (s Snapshot) Horizon() uint64 { return s.Xmin }
