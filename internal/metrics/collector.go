package metrics

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark/tidemark/internal/store"
	"github.com/tidemark/tidemark/internal/stream"
)

// Sources is what the daemon's collector reads on each scrape.
type Sources struct {
	Streams []*stream.Stream
	Store   *store.Store
	// Batch: recurring tasks are configured, so the batch metrics are
	// collected too.
	Batch bool
	// Timeout bounds the store reads of one scrape (default 10s).
	Timeout time.Duration
}

// collector reads the daemon's state at scrape time: stream states and lag
// from the streams, object and backfill figures and batch counts from the
// metadata store. Nothing is counted on the hot paths but the changes a
// stream applies, an atomic add per batch.
type collector struct {
	src   Sources
	names map[string]bool // the configured streams
}

// NewCollector builds the collector of the daemon's streams, objects,
// backfills and batch tables.
func NewCollector(src Sources) prometheus.Collector {
	src.Timeout = cmp.Or(src.Timeout, 10*time.Second)
	c := &collector{src: src, names: map[string]bool{}}
	for _, s := range src.Streams {
		c.names[s.Name()] = true
	}
	return c
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	streamState = desc("tidemark_stream_state",
		"The stream's lifecycle state: 1 for the current state, 0 for the others.", "stream", "state")
	streamLag = desc("tidemark_stream_lag_seconds",
		"How far the destination is behind the source: the age of the oldest change received and not yet committed to the destination; 0 when caught up.", "stream")
	streamLagOver = desc("tidemark_stream_lag_over_threshold",
		"1 while the lag is over the stream's lag_warn, else 0.", "stream")
	streamWAL = desc("tidemark_stream_wal_retained_bytes",
		"WAL the stream's replication slot holds back on the source, as last measured.", "stream")
	streamSnapshotHold = desc("tidemark_stream_snapshot_hold_seconds",
		"How long a first start's initial load in the replication slot's exported snapshot has held the live stream and the source's cleanup horizon (xmin) back; 0 when none is held.", "stream")
	streamEvents = desc("tidemark_stream_events_total",
		"Changes from the source's log committed to the destination (not backfilled rows).", "stream")

	objectStatus = desc("tidemark_object_status",
		"The object's backfill status: 1 for the current status (none: no backfill), 0 for the others.", "stream", "object", "status")
	objectLoaded = desc("tidemark_object_loaded",
		"1 when the object's latest backfill is committed in the destination, else 0.", "stream", "object")
	backfillRowsRead = desc("tidemark_backfill_rows_read",
		"Rows the object's latest backfill run read from the source.", "stream", "object")
	backfillRowsWritten = desc("tidemark_backfill_rows_written",
		"Rows the object's latest backfill run wrote to the destination.", "stream", "object")
	backfillChunks = desc("tidemark_backfill_chunks",
		"Chunks the object's latest backfill run merged.", "stream", "object")
	backfills = desc("tidemark_backfills",
		"Backfills of the stream's tables by status, every backfill ever recorded.", "stream", "status")
	// backfillRuns is backfills under its name before "run" came to mean
	// several backfills started together: deprecated, kept for dashboards
	// for one release (docs/metrics.md).
	backfillRuns = desc("tidemark_backfill_runs",
		"Deprecated: tidemark_backfills under its old name, removed in the next release.", "stream", "status")

	batchBackfills = desc("tidemark_batch_backfills",
		"Batch backfills by state.", "state")
	batchBackfillInstances = desc("tidemark_batch_backfill_instances",
		"Instances of each batch backfill that has not ended (waiting, running or blocked), by instance state.", "backfill_id", "backfill", "state")
	batchInstances = desc("tidemark_batch_instances",
		"Task instances by state: of batch backfills (kind backfill) and of the recurring schedule (kind schedule).", "kind", "state")
)

var (
	streamStates    = []string{store.StateNotStarted, store.StateStarting, store.StateRunning, store.StateRetrying, store.StatePaused, store.StateFailed}
	objectStatuses  = []string{store.StatusNone, store.StatusPending, store.StatusActive, store.StatusCompleted, store.StatusStopped, store.StatusFailed}
	batchStates     = []string{store.BatchWaiting, store.BatchRunning, store.BatchSucceeded, store.BatchFailed, store.BatchStopped, store.BatchBlocked}
	openBatchStates = []string{store.BatchWaiting, store.BatchRunning, store.BatchBlocked}
	instanceStates  = []string{store.InstanceWaiting, store.InstanceRunning, store.InstanceSucceeded, store.InstanceFailed,
		store.InstanceStopped, store.InstanceDryRun, store.InstanceBlocked}
)

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{streamState, streamLag, streamLagOver, streamWAL, streamSnapshotHold, streamEvents,
		objectStatus, objectLoaded, backfillRowsRead, backfillRowsWritten, backfillChunks, backfills, backfillRuns} {
		ch <- d
	}
	if c.src.Batch {
		ch <- batchBackfills
		ch <- batchBackfillInstances
		ch <- batchInstances
	}
}

// Collect implements prometheus.Collector. A store read that fails leaves
// its metrics out and is reported to the scrape's error log.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.src.Timeout)
	defer cancel()
	c.collectStreams(ch)
	if err := c.collectObjects(ctx, ch); err != nil {
		ch <- prometheus.NewInvalidMetric(objectStatus, err)
	}
	if err := c.collectRuns(ctx, ch); err != nil {
		ch <- prometheus.NewInvalidMetric(backfills, err)
	}
	if c.src.Batch {
		if err := c.collectBatch(ctx, ch); err != nil {
			ch <- prometheus.NewInvalidMetric(batchBackfills, err)
		}
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *collector) collectStreams(ch chan<- prometheus.Metric) {
	for _, s := range c.src.Streams {
		name := s.Name()
		state := s.State().State
		for _, st := range streamStates {
			ch <- gauge(streamState, flag(st == state), name, st)
		}
		ch <- gauge(streamLag, s.Lag().Seconds(), name)
		ch <- gauge(streamLagOver, flag(s.LagOver()), name)
		ch <- gauge(streamWAL, float64(s.RetainedWAL()), name)
		ch <- gauge(streamSnapshotHold, s.SnapshotHold().Seconds(), name)
		ch <- prometheus.MustNewConstMetric(streamEvents, prometheus.CounterValue, float64(s.EventsApplied()), name)
	}
}

// collectObjects reports every object of a configured stream with the
// figures of its latest backfill run.
func (c *collector) collectObjects(ctx context.Context, ch chan<- prometheus.Metric) error {
	objs, err := c.src.Store.ListObjects(ctx, "")
	if err != nil {
		return err
	}
	runs, err := c.src.Store.LatestBackfills(ctx)
	if err != nil {
		return err
	}
	byID := make(map[int64]store.Backfill, len(runs))
	for _, b := range runs {
		byID[b.ID] = b
	}
	for _, o := range objs {
		if !c.names[o.Stream] {
			continue
		}
		object := o.Schema + "." + o.Table
		for _, st := range objectStatuses {
			label := st
			if st == store.StatusNone {
				label = "none"
			}
			ch <- gauge(objectStatus, flag(st == o.Status), o.Stream, object, label)
		}
		ch <- gauge(objectLoaded, flag(o.Loaded), o.Stream, object)
		b, ok := byID[o.BackfillID]
		if !ok {
			continue
		}
		ch <- gauge(backfillRowsRead, float64(b.RowsRead), o.Stream, object)
		ch <- gauge(backfillRowsWritten, float64(b.RowsWritten), o.Stream, object)
		ch <- gauge(backfillChunks, float64(b.Chunks), o.Stream, object)
	}
	return nil
}

// collectRuns reports the backfill runs of every configured stream by
// status, with 0 for a status no run has.
func (c *collector) collectRuns(ctx context.Context, ch chan<- prometheus.Metric) error {
	counts, err := c.src.Store.CountBackfills(ctx)
	if err != nil {
		return err
	}
	n := map[[2]string]int64{}
	for _, sc := range counts {
		n[[2]string{sc.Stream, sc.Status}] = sc.N
	}
	for _, s := range c.src.Streams {
		for _, st := range objectStatuses[1:] {
			v := float64(n[[2]string{s.Name(), st}])
			ch <- gauge(backfills, v, s.Name(), st)
			ch <- gauge(backfillRuns, v, s.Name(), st)
		}
	}
	return nil
}

func (c *collector) collectBatch(ctx context.Context, ch chan<- prometheus.Metric) error {
	byState, err := c.src.Store.CountBatchBackfills(ctx)
	if err != nil {
		return err
	}
	for _, st := range batchStates {
		ch <- gauge(batchBackfills, float64(byState[st]), st)
	}
	backfill, schedule, err := c.src.Store.CountBatchInstances(ctx)
	if err != nil {
		return err
	}
	for _, st := range instanceStates {
		ch <- gauge(batchInstances, float64(backfill[st]), "backfill", st)
		ch <- gauge(batchInstances, float64(schedule[st]), "schedule", st)
	}
	for _, state := range openBatchStates {
		if byState[state] == 0 {
			continue // nothing to list
		}
		list, err := c.src.Store.ListBatchBackfills(ctx, store.BatchBackfillFilter{State: state})
		if err != nil {
			return err
		}
		for _, b := range list {
			id := strconv.FormatInt(b.ID, 10)
			for _, st := range instanceStates {
				ch <- gauge(batchBackfillInstances, float64(b.States[st]), id, b.Name, st)
			}
		}
	}
	return nil
}
