package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// openSink opens the configured destination through its registered type;
// one that writes events gets the encoder of the stream's source type.
func openSink(ctx context.Context, cfg *config.Stream) (sink.Sink, error) {
	snk, err := sink.Open(ctx, cfg.Destination)
	if err != nil {
		return nil, err
	}
	if ew, ok := snk.(sink.EventWriter); ok {
		typ, err := source.Lookup(cfg.Source.Type)
		if err != nil {
			snk.Close()
			return nil, err
		}
		db := ""
		if typ.Events.Database != nil {
			db = typ.Events.Database(cfg.Source.DSN)
		}
		ew.UseEncoder(typ.Encoder(cfg.Name, db, true, "tidemark"))
	}
	return snk, nil
}

// discover finds the source tables the stream includes, describes them,
// creates their destination tables and records each as an object. A table
// without a usable key, or one the destination cannot order or name (see
// sink.ErrKeyOrder, sink.ErrTableName), becomes a Failed object with the
// reason, and is left out of the publication (updates to it would otherwise
// fail on the source).
//
// With many tables the start is round trips: the objects are listed in
// one query to choose the tables (each is read again right before it is
// recorded, so that no change made meanwhile is overwritten), and the
// source describes tables ahead of the destination's steps, which take
// them one by one in order: a few at a time, or, where the source can
// (source.ManyDescriber), in batches of describeBatch, each batch a few
// catalog queries for all its tables. The destination's check of a table
// it has just created asks it nothing (the PostgreSQL sink).
func (s *Stream) discover(ctx context.Context, src source.Source, snk sink.Sink, firstStart bool) (map[change.TableID]*change.Table, map[change.TableID]string, error) {
	all, err := src.Tables(ctx)
	if err != nil {
		return nil, nil, err
	}
	objs, err := s.st.ListObjects(ctx, s.cfg.Name)
	if err != nil {
		return nil, nil, err
	}
	recorded := make(map[change.TableID]store.Object, len(objs))
	for _, o := range objs {
		recorded[change.TableID{Schema: o.Schema, Name: o.Table}] = o
	}
	tables := map[change.TableID]*change.Table{}
	skipped := map[change.TableID]string{}
	var wanted []change.TableID
	for _, id := range all {
		if !s.cfg.Includes(id) {
			continue
		}
		o, isKnown := recorded[id]
		if !firstStart && !s.cfg.IncludeFutureTables && !isKnown {
			continue // a table created after the stream started: not wanted
		}
		if isKnown && staysFailed(o.Status, o.Reason) {
			skipped[id] = o.Reason // until a backfill of it is initiated
			continue
		}
		wanted = append(wanted, id)
	}
	ctx, cancel := context.WithCancel(ctx)
	ahead := describeAhead(ctx, src, wanted, s.cfg.Keys)
	defer func() {
		cancel() // a failed start leaves the rest undescribed
		ahead.wait()
	}()
	// The objects are recorded a batch at a time, in one store write
	// each; those of a start that fails on the way are recorded too.
	rec := &objectRecorder{s: s, firstStart: firstStart}
	defer func() {
		if err := rec.flush(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("record the objects found before the start failed", logkey.Err(err))
		}
	}()
	for i, id := range wanted {
		t, err := ahead.get(ctx, i)
		if err != nil && !errors.Is(err, source.ErrNoKey) {
			return nil, nil, err
		}
		if t != nil {
			ensureErr := ensureTable(ctx, snk, t)
			if errors.Is(ensureErr, sink.ErrKeyOrder) || errors.Is(ensureErr, sink.ErrTableName) {
				t, err = nil, ensureErr
			} else if ensureErr != nil {
				return nil, nil, fmt.Errorf("create destination table for %s: %w", id, ensureErr)
			} else if rerr := s.reconcile(ctx, src, snk, t); objectError(rerr) {
				t, err = nil, sticky(rerr)
			} else if rerr != nil {
				return nil, nil, rerr
			}
		}
		if err := rec.add(ctx, id, t, err); err != nil {
			return nil, nil, err
		}
		if t == nil {
			skipped[id] = err.Error()
			continue
		}
		tables[id] = t
	}
	if err := rec.flush(ctx); err != nil {
		return nil, nil, err
	}
	return tables, skipped, nil
}

// describeWorkers is how many describes of the source run at a time at a
// stream's start; describeBatch, how many tables each describes at once
// where the source describes several in one go (source.ManyDescriber).
const (
	describeWorkers = 4
	describeBatch   = 50
)

// describing is tables being described ahead of their use.
type describing struct {
	results []described
	wg      sync.WaitGroup
}

type described struct {
	t    *change.Table
	err  error
	done chan struct{}
}

// describeAhead describes ids in order, describeWorkers describes at a
// time (of describeBatch tables each where the source can); get waits for
// one. The workers stop when ctx ends.
func describeAhead(ctx context.Context, src source.Catalog, ids []change.TableID, keys map[change.TableID][]string) *describing {
	d := &describing{results: make([]described, len(ids))}
	for i := range d.results {
		d.results[i].done = make(chan struct{})
	}
	many, _ := src.(source.ManyDescriber)
	batch := 1
	if many != nil {
		batch = describeBatch
	}
	var next atomic.Int64
	for range min(describeWorkers, (len(ids)+batch-1)/batch) {
		d.wg.Go(func() {
			for {
				lo := int(next.Add(int64(batch)) - int64(batch))
				if lo >= len(ids) || ctx.Err() != nil {
					return
				}
				d.describe(ctx, src, many, ids, keys, lo, min(lo+batch, len(ids)))
			}
		})
	}
	return d
}

// describe describes ids[lo:hi], in one go when the source can. A batch
// that failed as a whole is described table by table: the error, if it
// comes again, then names its table.
func (d *describing) describe(ctx context.Context, src source.Catalog, many source.ManyDescriber, ids []change.TableID, keys map[change.TableID][]string, lo, hi int) {
	if many != nil {
		tables, errs, err := many.DescribeMany(ctx, ids[lo:hi], keys)
		if err == nil && len(tables) == hi-lo && len(errs) == hi-lo {
			for i := lo; i < hi; i++ {
				r := &d.results[i]
				r.t, r.err = tables[i-lo], errs[i-lo]
				close(r.done)
			}
			return
		}
	}
	for i := lo; i < hi; i++ {
		r := &d.results[i]
		r.t, r.err = src.Describe(ctx, ids[i], keys[ids[i]])
		close(r.done)
	}
}

// get waits for the i-th table's description.
func (d *describing) get(ctx context.Context, i int) (*change.Table, error) {
	select {
	case <-d.results[i].done:
		return d.results[i].t, d.results[i].err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// wait waits for the workers to end.
func (d *describing) wait() { d.wg.Wait() }

// ensureTable creates the destination table of t where the destination
// holds tables.
func ensureTable(ctx context.Context, snk sink.Sink, t *change.Table) error {
	if c, ok := snk.(sink.TableCreator); ok {
		return c.EnsureTable(ctx, t)
	}
	return nil
}

// known tells whether the stream already has the table as an object.
func (s *Stream) known(ctx context.Context, id change.TableID) bool {
	_, err := s.st.GetObject(ctx, s.cfg.Name, id.Schema, id.Name)
	return err == nil
}

// objectRecorder records the objects a start found, objectBatch at a time.
type objectRecorder struct {
	s          *Stream
	firstStart bool
	names      []store.ObjectName
	found      map[store.ObjectName]foundTable
}

// foundTable is a table as a start found it: its shape, or why it has none.
type foundTable struct {
	t   *change.Table
	err error
}

// objectBatch is how many objects a start records in one store write.
const objectBatch = 128

// add records the table's object, with the batch, once the batch is full.
func (r *objectRecorder) add(ctx context.Context, id change.TableID, t *change.Table, describeErr error) error {
	n := store.ObjectName{Schema: id.Schema, Table: id.Name}
	if r.found == nil {
		r.found = map[store.ObjectName]foundTable{}
	}
	if _, dup := r.found[n]; !dup {
		r.names = append(r.names, n)
	}
	r.found[n] = foundTable{t: t, err: describeErr}
	if len(r.names) < objectBatch {
		return nil
	}
	return r.flush(ctx)
}

// flush records the batch's objects.
func (r *objectRecorder) flush(ctx context.Context) error {
	if len(r.names) == 0 {
		return nil
	}
	names, found := r.names, r.found
	r.names, r.found = nil, nil
	return r.s.st.RecordObjects(ctx, r.s.cfg.Name, names, func(n store.ObjectName, o store.Object, known bool) (store.Object, error) {
		f := found[n]
		return r.s.objectFound(change.TableID{Schema: n.Schema, Name: n.Table}, o, known, f.t, f.err, r.firstStart), nil
	})
}

// recordObject records one table's object as a start would (discovery of
// a table while the stream runs).
func (s *Stream) recordObject(ctx context.Context, id change.TableID, t *change.Table, describeErr error, firstStart bool) error {
	r := &objectRecorder{s: s, firstStart: firstStart}
	if err := r.add(ctx, id, t, describeErr); err != nil {
		return err
	}
	return r.flush(ctx)
}

// objectFound is the object o (known: recorded before) as a start finds
// its table: described as t, or not (describeErr).
func (s *Stream) objectFound(id change.TableID, o store.Object, known bool, t *change.Table, describeErr error, firstStart bool) store.Object {
	if t != nil {
		o.Columns = columnInfo(t)
	}
	switch {
	case describeErr != nil:
		o.Status, o.Reason = StatusFailed, describeErr.Error()
	case !known || (o.Status == StatusFailed && (o.BackfillID == 0 || o.Reason == ReasonDropped)):
		o.Status, o.Reason = StatusNone, s.noStatusReason(id, firstStart)
	case o.Status == StatusNone && o.Reason == ReasonNotStarted:
		// Its first start's automatic backfill never began: it still gets it.
		o.Reason = s.noStatusReason(id, true)
	case o.Status == StatusNone && o.Reason == ReasonDiscovered:
		o.Reason = s.noStatusReason(id, false)
	}
	return o
}

// noStatusReason says why an object without a backfill has none.
func (s *Stream) noStatusReason(id change.TableID, firstStart bool) string {
	switch {
	case !firstStart && s.cfg.AutoBackfill(id):
		return ReasonDiscovered
	case !firstStart:
		return ReasonFuture
	case s.cfg.Backfill.Mode == config.BackfillManual:
		return ReasonManual
	case !s.cfg.AutoBackfill(id):
		return ReasonExcluded
	}
	return ReasonNotStarted
}

func columnInfo(t *change.Table) []store.ColumnInfo {
	key := map[int]bool{}
	for _, k := range t.Key {
		key[k] = true
	}
	cols := make([]store.ColumnInfo, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = store.ColumnInfo{Name: c.Name, Type: c.Type, Key: key[i]}
	}
	return cols
}

// autoBackfill starts the "backfill historical data" of a stream's first
// start: every object not excluded from it.
func (s *Stream) autoBackfill(ctx context.Context) error {
	objs, err := s.st.ListObjects(ctx, s.cfg.Name)
	if err != nil {
		return err
	}
	var ids, found []change.TableID
	for _, o := range objs {
		id := change.TableID{Schema: o.Schema, Name: o.Table}
		switch {
		case o.Status == StatusNone && o.Reason == ReasonNotStarted:
			ids = append(ids, id)
		case o.Status == StatusNone && o.Reason == ReasonDiscovered && s.lookup(id) != nil:
			found = append(found, id)
		}
	}
	if len(ids) > 0 {
		if _, err := s.bf.initiate(ctx, ids, store.StartedByAutomatic, nil, false); err != nil {
			return err
		}
	}
	if len(found) > 0 {
		_, err = s.bf.initiate(ctx, found, StartedByDiscovery, nil, false)
	}
	return err
}

// backfillAll backfills every streamed object that is not already Pending
// or Active, after a reset.
func (s *Stream) backfillAll(ctx context.Context) error {
	objs, err := s.st.ListObjects(ctx, s.cfg.Name)
	if err != nil {
		return err
	}
	var ids, running []change.TableID
	for _, o := range objs {
		id := change.TableID{Schema: o.Schema, Name: o.Table}
		if s.lookup(id) == nil {
			continue
		}
		ids = append(ids, id)
		if CanInitiate(id.String(), o.Status) != nil {
			running = append(running, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// Chunks applied before the slot was lost may be stale: start over.
	if len(running) > 0 {
		if err := s.bf.stop(ctx, running); err != nil {
			return err
		}
	}
	_, err = s.bf.initiate(ctx, ids, StartedByReset, map[string]any{"reason": "stream reset after the replication slot was lost"}, false)
	return err
}

// StartedByReset marks backfills a stream reset started.
const StartedByReset = "reset"

// MarkNotStarted records the objects' "-" reason before a stream ever ran.
func (s *Stream) MarkNotStarted(ctx context.Context) error {
	st, err := s.st.GetStream(ctx, s.cfg.Name)
	if err == nil && st.State != store.StateNotStarted {
		s.mu.Lock()
		s.state = st
		s.mu.Unlock()
		return nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.st.PutStream(ctx, s.state)
}
