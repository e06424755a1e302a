package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/sink"
	"github.com/tidemark/tidemark/internal/source"
	"github.com/tidemark/tidemark/internal/store"
)

// Schema changes on the stream's side (see docs/schema-changes.md): what
// the applier decided is recorded on the objects, tables created on the
// source while the stream runs are found and streamed, dropped ones end,
// and a table the stream does not stream is checked and readied before a
// backfill of it starts.

// Who else starts backfills.
const (
	// StartedByDiscovery marks the backfill that copies the rows of a
	// table the stream found after its first start.
	StartedByDiscovery = "discovery"
	// StartedBySchemaChange marks a backfill a schema change needs: a
	// column added with a default whose value in older rows the
	// destination cannot know.
	StartedBySchemaChange = "schema_change"
)

// ReasonDropped is the reason of an object whose table was dropped on the
// source. A table created again under the same name is a new table.
const ReasonDropped = "table dropped on the source: the rows copied so far stay in the destination"

// TableDiffError lists how a destination table differs from its source
// table in ways tidemark does not change by itself.
type TableDiffError struct {
	Table    change.TableID
	Stream   string
	Problems []string
}

func (e *TableDiffError) Error() string {
	return fmt.Sprintf("the destination table of %s differs from the source: %s; fix the destination table, then run `tidemark backfill initiate %s %s`",
		e.Table, strings.Join(e.Problems, "; "), e.Stream, e.Table)
}

// sticky makes the failure of a destination table that differs from its
// source a schema failure, which only an initiated backfill ends: the
// changes the stream does not apply meanwhile are lost to the destination.
func sticky(err error) error {
	var diff *TableDiffError
	if errors.As(err, &diff) {
		return fmt.Errorf("%s%w", schemaReasonPrefix, err)
	}
	return err
}

// objectError tells errors that make a table unstreamable (recorded on its
// object) from failures worth another try.
func objectError(err error) bool {
	var diff *TableDiffError
	return errors.Is(err, source.ErrNoKey) || errors.Is(err, sink.ErrKeyOrder) || errors.Is(err, sink.ErrTableName) ||
		errors.Is(err, sink.ErrRejected) || errors.As(err, &diff) || source.IsPermanent(err)
}

// tableRequest asks the applier, which alone uses the destination while
// the stream runs, about one table.
type tableRequest struct {
	// table is the source's shape of a table to ready for streaming: its
	// destination table is created, or checked and completed.
	table *change.Table
	check bool // only check, and report the differences
	// stop names a table to stop (dropped on the source), for reason.
	stop   *change.TableID
	reason string
	result chan error
}

// tableOp sends a table request to the applier and waits for its answer.
func (a *applier) tableOp(ctx context.Context, tr *tableRequest) error {
	tr.result = make(chan error, 1)
	select {
	case a.requests <- applierRequest{table: tr}:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.done:
		return errApplierGone
	}
	select {
	case err := <-tr.result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-a.done:
		return errApplierGone
	}
}

// handleTable answers a table request in the applier's goroutine. The
// destination is used once the writer committed everything before.
func (a *applier) handleTable(ctx context.Context, tr *tableRequest) error {
	s := a.schema
	if s == nil {
		return errors.New("schema changes are not followed here")
	}
	if tr.stop != nil {
		if _, stopped := s.stopped[*tr.stop]; !stopped {
			a.stopTable(*tr.stop, tr.reason)
		}
		return nil
	}
	if err := a.flushAndWait(ctx); err != nil {
		return err
	}
	t := tr.table
	if s.ddl != nil {
		if !tr.check {
			if err := s.ddl.EnsureTable(ctx, t); err != nil {
				return err
			}
		}
		check, err := s.ddl.CheckTable(ctx, t)
		if err != nil {
			return fmt.Errorf("check the destination table of %s: %w", t.ID, err)
		}
		if len(check.Problems) > 0 {
			return &TableDiffError{Table: t.ID, Stream: s.stream, Problems: check.Problems}
		}
		if tr.check {
			return nil
		}
		// Columns are added without a default: the backfill that follows
		// writes every row.
		if len(check.Steps) > 0 {
			if err := s.ddl.AlterTable(ctx, t, check.Steps); err != nil {
				return err
			}
		}
	}
	if tr.check {
		return nil
	}
	s.dest[t.ID] = t
	delete(s.stopped, t.ID)
	a.refused.forget(t.ID)
	return nil
}

// schemaQueue carries what the applier reports to the stream's schema
// goroutine, without ever blocking the applier.
type schemaQueue struct {
	mu     sync.Mutex
	events []schemaEvent
	wake   chan struct{}
}

type schemaEvent struct {
	id     change.TableID
	stop   string        // the table stopped, for this reason
	shaped *change.Table // the destination table has this shape now
	refill bool          // a backfill must bring values older rows lack
}

func newSchemaQueue() *schemaQueue { return &schemaQueue{wake: make(chan struct{}, 1)} }

func (q *schemaQueue) push(ev schemaEvent) {
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *schemaQueue) take() []schemaEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.events
	q.events = nil
	return evs
}

// newSchema wires the applier's schema state to the stream.
func (s *Stream) newSchema(src source.Source, snk sink.Sink, q *schemaQueue) *schemaState {
	st := newSchemaState(s.cfg.Name, s.lookup)
	st.retry = retryPolicy{Initial: s.cfg.Retry.Initial, Max: s.cfg.Retry.Max}
	st.catalog = src.Attributes
	if d, ok := snk.(ddlSink); ok {
		st.ddl = d
	}
	_, holdsTables := snk.(sink.TableCreator)
	st.tableless = !holdsTables
	st.hooks = schemaHooks{
		shaped: func(id change.TableID, t *change.Table) {
			s.mu.Lock()
			if s.tables[id] != nil {
				s.tables = withTable(s.tables, id, t)
			}
			s.mu.Unlock()
			q.push(schemaEvent{id: id, shaped: t})
		},
		stopped: func(id change.TableID, reason string) {
			s.parkTable(id, reason)
			q.push(schemaEvent{id: id, stop: reason})
		},
		refill: func(id change.TableID) { q.push(schemaEvent{id: id, refill: true}) },
	}
	return st
}

// withTable copies a table map with id set to t (nil: removed); readers of
// the old map (Tables) keep a consistent one.
func withTable(m map[change.TableID]*change.Table, id change.TableID, t *change.Table) map[change.TableID]*change.Table {
	out := make(map[change.TableID]*change.Table, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	if t == nil {
		delete(out, id)
	} else {
		out[id] = t
	}
	return out
}

// setTable streams a table with shape t.
func (s *Stream) setTable(id change.TableID, t *change.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables = withTable(s.tables, id, t)
	delete(s.skipped, id)
	delete(s.parked, id)
}

// parkTable stops streaming a table. The log still carries its changes
// until the next start leaves it out of the publication, so the stream
// keeps its shape for them (lookupLog); the applier drops them.
func (s *Stream) parkTable(id change.TableID, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tables[id]; t != nil {
		if s.parked == nil {
			s.parked = map[change.TableID]*change.Table{}
		}
		s.parked[id] = t
		s.tables = withTable(s.tables, id, nil)
	}
	if s.skipped == nil {
		s.skipped = map[change.TableID]string{}
	}
	s.skipped[id] = reason
}

// lookupLog is the table the log's changes are read into: a streamed
// table, or a stopped one (whose changes the applier drops).
func (s *Stream) lookupLog(id change.TableID) *change.Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tables[id]; t != nil {
		return t
	}
	return s.parked[id]
}

// watchSchema records what the applier decided and looks for tables
// created or dropped on the source, every discovery_interval.
func (s *Stream) watchSchema(ctx context.Context, src source.Source, app *applier, q *schemaQueue) error {
	interval := s.cfg.DiscoveryInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-q.wake:
			for _, ev := range q.take() {
				s.schemaEvent(ctx, ev)
			}
		case <-tick.C:
			if err := s.discoverLive(ctx, src, app); err != nil && ctx.Err() == nil {
				s.log.Warn("looking for new and dropped tables failed; trying again later", logkey.Err(err))
			}
		}
	}
}

func (s *Stream) schemaEvent(ctx context.Context, ev schemaEvent) {
	var err error
	switch {
	case ev.stop != "":
		err = s.bf.failObject(ctx, ev.id, ev.stop)
	case ev.refill:
		err = s.refill(ctx, ev.id)
	case ev.shaped != nil:
		err = s.updateColumns(ctx, ev.id, ev.shaped)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Error("record a schema change", logkey.Object(ev.id.String()), logkey.Err(err))
	}
}

func (s *Stream) updateColumns(ctx context.Context, id change.TableID, t *change.Table) error {
	return s.st.SetObjectColumns(ctx, s.cfg.Name, id.Schema, id.Name, columnInfo(t))
}

// refill backfills a table again, stopping a backfill under way (its
// chunks before the schema change lack the values too).
func (s *Stream) refill(ctx context.Context, id change.TableID) error {
	o, err := s.st.GetObject(ctx, s.cfg.Name, id.Schema, id.Name)
	if err != nil {
		return err
	}
	if CanInitiate(id.String(), o.Status) != nil {
		if err := s.bf.stop(ctx, []change.TableID{id}); err != nil {
			return err
		}
	}
	_, err = s.bf.initiate(ctx, []change.TableID{id}, StartedBySchemaChange,
		map[string]any{"reason": "a column added on the source holds values the destination cannot know for its older rows"}, false)
	return err
}

// discoverLive streams the included tables created on the source since
// the stream started (include_future_tables), and ends the ones dropped.
func (s *Stream) discoverLive(ctx context.Context, src source.Source, app *applier) error {
	all, err := src.Tables(ctx)
	if err != nil {
		return err
	}
	present := make(map[change.TableID]bool, len(all))
	for _, id := range all {
		present[id] = true
	}
	for id := range s.Tables() {
		if !present[id] {
			if err := app.tableOp(ctx, &tableRequest{stop: &id, reason: ReasonDropped}); err != nil {
				return err
			}
		}
	}
	for _, id := range all {
		if !s.cfg.Includes(id) || s.lookup(id) != nil {
			continue
		}
		if why := s.whyNotStreamed(id); why != "" && why != ReasonDropped {
			continue // not streamable, or stopped: until a backfill or a restart
		}
		if !s.cfg.IncludeFutureTables && !s.known(ctx, id) {
			continue
		}
		if err := s.addTable(ctx, src, app, id); err != nil {
			return err
		}
	}
	return nil
}

// addTable streams a table found while running, from the moment it joins
// the publication, and copies the rows it held before with a backfill
// (started by "discovery") unless it gets no automatic backfill.
func (s *Stream) addTable(ctx context.Context, src source.Source, app *applier, id change.TableID) error {
	t, err := s.activate(ctx, src, app, id)
	if err != nil {
		if !objectError(err) {
			return err
		}
		err = sticky(err)
		s.parkTable(id, err.Error())
		return s.recordObject(ctx, id, nil, err, false)
	}
	s.log.Info("streaming a new table", logkey.Object(id.String()))
	if err := s.recordObject(ctx, id, t, nil, false); err != nil {
		return err
	}
	if !s.cfg.AutoBackfill(id) {
		return nil
	}
	_, err = s.bf.initiate(ctx, []change.TableID{id}, StartedByDiscovery, nil, false)
	return err
}

// activate streams a table that is not streamed: described anew, its
// destination table created or checked and completed, known to the
// applier, then added to the publication, in that order, so that its
// first change in the log finds all of that ready. A backfill that
// follows reads chunks in snapshots taken after it joined.
func (s *Stream) activate(ctx context.Context, src source.Source, app *applier, id change.TableID) (*change.Table, error) {
	if !s.cfg.Includes(id) {
		return nil, fmt.Errorf("table %s is not included in stream %s", id, s.cfg.Name)
	}
	t, err := src.Describe(ctx, id, s.cfg.Keys[id])
	if err != nil {
		return nil, err
	}
	if err := app.tableOp(ctx, &tableRequest{table: t}); err != nil {
		return nil, err
	}
	s.setTable(id, t)
	if err := src.AddCapture(ctx, id); err != nil {
		// Not streamed after all: the next discovery (or backfill) tries
		// the whole activation again rather than taking the table for
		// streamed while the log carries none of its changes.
		s.mu.Lock()
		s.tables = withTable(s.tables, id, nil)
		s.mu.Unlock()
		return nil, err
	}
	// A table refused before (no key, say) and fixed since shows the
	// columns it is now streamed with.
	if err := s.st.SetObjectColumns(ctx, s.cfg.Name, id.Schema, id.Name, columnInfo(t)); err != nil {
		return nil, err
	}
	return t, nil
}

// precheck refuses, when the stream runs, a backfill a person asked for
// whose destination table differs from the source in ways tidemark does not
// change by itself (what it does change, it changes when the backfill
// starts, or the stream does as it reaches the change). Backfills tidemark
// starts are checked when they start (the object fails then).
func (s *Stream) precheck(ctx context.Context, ids []change.TableID, startedBy string) []string {
	switch startedBy {
	case store.StartedByAutomatic, StartedByReset, StartedByDiscovery, StartedBySchemaChange:
		return nil
	}
	s.bf.mu.Lock()
	rt := s.bf.rt
	s.bf.mu.Unlock()
	s.mu.Lock()
	src := s.src
	s.mu.Unlock()
	if rt == nil || src == nil {
		return nil
	}
	var refusals []string
	for _, id := range ids {
		if !s.known(ctx, id) {
			continue // refused as no object by initiate
		}
		t, err := src.Describe(ctx, id, s.cfg.Keys[id])
		if err != nil {
			continue // the backfill fails with it when it starts, as it always did
		}
		var diff *TableDiffError
		if err := rt.applier.tableOp(ctx, &tableRequest{table: t, check: true}); errors.As(err, &diff) {
			refusals = append(refusals, fmt.Sprintf("cannot initiate a backfill of %s: %v", id, err))
		}
	}
	return refusals
}

// reconcile checks, at a start, the destination table of a streamed table
// against the source's shape now: columns the destination lacks are added
// (with the value the source gives older rows), narrower types widened;
// other differences make the table unstreamable (a TableDiffError). A
// rename the stream did not see shows as one of those.
func (s *Stream) reconcile(ctx context.Context, src source.Source, snk sink.Sink, t *change.Table) error {
	alt, ok := snk.(sink.Alterer)
	if !ok {
		return nil
	}
	check, err := alt.CheckTable(ctx, t)
	if err != nil {
		return fmt.Errorf("check the destination table of %s: %w", t.ID, err)
	}
	if len(check.Problems) > 0 {
		return &TableDiffError{Table: t.ID, Stream: s.cfg.Name, Problems: check.Problems}
	}
	if len(check.Steps) == 0 {
		return nil
	}
	attrs, err := src.Attributes(ctx, t.ID)
	if err != nil {
		return err
	}
	refill := false
	for i, st := range check.Steps {
		if st.Kind != sink.AddColumn {
			continue
		}
		if a, ok := attrs[st.Column.Num]; ok {
			check.Steps[i].Default = a.Missing
			refill = refill || (a.Missing == nil && a.HasDefault)
		}
	}
	if err := alt.AlterTable(ctx, t, check.Steps); err != nil {
		return err
	}
	s.log.Info("destination table follows the source's schema", logkey.Object(t.ID.String()), "steps", describeSteps(check.Steps))
	if refill {
		s.mu.Lock()
		s.refills = append(s.refills, t.ID)
		s.mu.Unlock()
	}
	return nil
}

// startRefills starts the backfills reconcile asked for.
func (s *Stream) startRefills(ctx context.Context) error {
	s.mu.Lock()
	ids := s.refills
	s.refills = nil
	s.mu.Unlock()
	for _, id := range ids {
		if err := s.refill(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// failObject records an object as failed for reason, ending its pending
// or active backfill.
func (m *backfills) failObject(ctx context.Context, id change.TableID, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var r *run
	if r = m.active[id]; r != nil {
		delete(m.active, id)
		if r.cancel != nil {
			r.cancel()
		}
	} else {
		for i, q := range m.queue {
			if q.rec.Schema == id.Schema && q.rec.Table == id.Name {
				r = q
				m.queue = append(m.queue[:i], m.queue[i+1:]...)
				break
			}
		}
	}
	if r != nil {
		delete(m.byID, r.rec.ID)
		if err := m.finishLocked(ctx, r, StatusFailed, reason); err != nil {
			return err
		}
		m.scheduleLocked()
	}
	return m.st.SetObjectStatus(ctx, m.stream, id.Schema, id.Name, StatusFailed, reason)
}
