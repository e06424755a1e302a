package pg

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// defaultCollation is the source database's default collation as the
// shape reads name it (collationColumnsGiven's parameters).
type defaultCollation struct {
	name     string
	bytewise bool
}

// params are its values as collationColumnsGiven's $2 and $3, in text.
func (d defaultCollation) params() [][]byte {
	return [][]byte{[]byte(d.name), []byte(strconv.FormatBool(d.bytewise))}
}

// defaultCollationCache holds it once read, for a minute: a database's
// locale is set when it is created and never changes, but the name of its
// twin in pg_collation can (a collation created or dropped), and a name
// no longer there would fail the key comparisons that use it.
type defaultCollationCache struct {
	mu     sync.Mutex
	loaded time.Time // zero: not read
	value  defaultCollation
}

// defaultCollationFor is how long a read of it is used.
const defaultCollationFor = time.Minute

// defaultCollation reads the database's default collation, at most once
// a minute (a failed read is tried again next time). It runs outside any
// chunk's transaction, whose snapshot its catalog read would take too
// early. The lock is not held while it reads: a caller waits for the
// server under its own context only (workers that find it stale at once
// each read it, once a minute).
func (s *Source) defaultCollation(ctx context.Context) (defaultCollation, error) {
	c := &s.defColl
	c.mu.Lock()
	if !c.loaded.IsZero() && time.Since(c.loaded) < defaultCollationFor {
		defer c.mu.Unlock()
		return c.value, nil
	}
	c.mu.Unlock()
	var d defaultCollation
	err := s.read(ctx, func(q queryer) error {
		return q.QueryRow(ctx, "SELECT "+defaultCollationName+", "+defaultCollationBytewise).Scan(&d.name, &d.bytewise)
	})
	if err != nil {
		return d, classify(fmt.Errorf("read the database's default collation: %w", err))
	}
	c.mu.Lock()
	c.loaded, c.value = time.Now(), d
	c.mu.Unlock()
	return d, nil
}
