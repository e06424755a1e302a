package event

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/collate"
)

// KeyOrder compares a table's keys, in canonical text, as the source
// orders them, which a read of a key range needs. It knows the order of
// integer, decimal, float, boolean, date, time, timestamp, uuid and bytes
// keys, and of text under a byte-ordered (C) collation or one of package
// collate's; other key types (text under a PostgreSQL locale, a time with
// zone, enums and other types without a neutral twin) are refused.
func KeyOrder(t *change.Table) (func(a, b change.Key) int, error) {
	cols := t.KeyColumns()
	fns := make([]func(a, b string) int, len(cols))
	for i, c := range cols {
		f, err := valueOrder(c)
		if err != nil {
			return nil, fmt.Errorf("table %s: key column %q (%s): %w", t.ID, c.Name, c.Type, err)
		}
		fns[i] = f
	}
	return func(a, b change.Key) int {
		for i, f := range fns {
			if i >= len(a) || i >= len(b) {
				return cmp.Compare(len(a), len(b))
			}
			var c int
			switch {
			case a[i].Null || b[i].Null:
				c = cmp.Compare(nullRank(a[i]), nullRank(b[i]))
			default:
				c = f(a[i].Text, b[i].Text)
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}, nil
}

func nullRank(v change.Value) int {
	if v.Null {
		return 1 // NULLS LAST, as PostgreSQL and MySQL DESC… never key on it
	}
	return 0
}

func valueOrder(c change.Column) (func(a, b string) int, error) {
	switch tag := change.TagOf(c); tag {
	case change.TagInt16, change.TagInt32, change.TagInt64:
		return byNumber(func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }), nil
	case change.TagFloat32, change.TagFloat64:
		return compareFloat, nil
	case change.TagDecimal:
		return compareDecimal, nil
	case change.TagBool, change.TagUUID, change.TagBytes:
		// f < t; lowercase hex sorts like the bytes it spells.
		return strings.Compare, nil
	case change.TagDate, change.TagTimestamp, change.TagTimestampTZ:
		return compareCivil, nil
	case change.TagTime:
		return byNumber(clockMicros), nil
	case change.TagText:
		if coll := collate.Lookup(c.Collation); c.Native != "" && coll != nil {
			return coll.Compare, nil
		}
		if c.ByteOrder {
			return strings.Compare, nil
		}
		return nil, fmt.Errorf("text under collation %q, whose order a replay cannot reproduce (only byte order and %s)", c.Collation, strings.Join(collate.Names(), ", "))
	default:
		return nil, fmt.Errorf("a %s key, whose source order a replay cannot reproduce", tag)
	}
}

func byNumber(parse func(string) (int64, error)) func(a, b string) int {
	return func(a, b string) int {
		x, _ := parse(a)
		y, _ := parse(b)
		return cmp.Compare(x, y)
	}
}

// compareFloat orders as PostgreSQL does: -0 equals 0, NaN after
// Infinity.
func compareFloat(a, b string) int {
	x, _ := strconv.ParseFloat(a, 64)
	y, _ := strconv.ParseFloat(b, 64)
	if math.IsNaN(x) || math.IsNaN(y) {
		return cmp.Compare(boolRank(math.IsNaN(x)), boolRank(math.IsNaN(y)))
	}
	return cmp.Compare(x, y)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareDecimal orders exact numbers: -Infinity, the numbers by value
// (1.10 equals 1.1), Infinity, NaN.
func compareDecimal(a, b string) int {
	rank := func(s string) int {
		switch s {
		case "-Infinity":
			return -1
		case "Infinity":
			return 1
		case "NaN":
			return 2
		}
		return 0
	}
	ra, rb := rank(a), rank(b)
	if ra != 0 || rb != 0 {
		return cmp.Compare(ra, rb)
	}
	x, okx := new(big.Rat).SetString(a)
	y, oky := new(big.Rat).SetString(b)
	if !okx || !oky {
		return strings.Compare(a, b)
	}
	return x.Cmp(y)
}

// compareCivil orders dates and timestamps, -infinity first and infinity
// last.
func compareCivil(a, b string) int {
	rank := func(s string) int {
		switch s {
		case "-infinity":
			return -1
		case "infinity":
			return 1
		}
		return 0
	}
	ra, rb := rank(a), rank(b)
	if ra != 0 || rb != 0 {
		return cmp.Compare(ra, rb)
	}
	x, _ := civil(a)
	y, _ := civil(b)
	return x.Compare(y)
}
