// Package pg is the PostgreSQL source: catalog reads, the publication and
// replication slot, the logical replication stream (pgoutput) and the chunk
// reads of backfills with the snapshot and log position that frame them.
//
// Concurrency contract: Stream runs in one goroutine and owns the
// replication connection; it returns when its context ends or the
// connection fails, and the caller reconnects. Confirm and WantPosition may
// be called from any goroutine. ReadChunk and Classify use a pool and may be
// called concurrently.
package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/logkey"
	"github.com/tidemark/tidemark/internal/source"
)

// Config says which source to read and how.
type Config struct {
	DSN         string
	Publication string
	// PublicationExisting uses Publication as a DBA made it: tidemark
	// never creates or alters it, and refuses one that would lose changes.
	PublicationExisting bool
	Slot                string
	// StatusInterval is the period of standby status updates; the server
	// drops a replication connection that stays silent for wal_sender_timeout.
	StatusInterval time.Duration
	// ProbeInterval is how often a pending chunk asks the server where the
	// stream is (a status update that requests a reply).
	ProbeInterval time.Duration
	// Timeouts bound every transaction on the source (zero values: the
	// defaults).
	Timeouts ReadTimeouts
	// TakeOver ends the session still holding the slot, a former owner's
	// (source.Options.TakeOver), before replication starts.
	TakeOver bool
}

// Source is one PostgreSQL source database.
type Source struct {
	cfg       Config
	pool      *pgxpool.Pool
	log       *slog.Logger
	confirmed atomic.Uint64 // highest position the destination committed
	want      atomic.Uint64 // a pending chunk waits for the stream to pass this
	defColl   defaultCollationCache
}

// Open connects the pool used for catalog and chunk reads.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Source, error) {
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse source DSN: %s", redactErr(err))
	}
	withSessionParams(pc.ConnConfig.RuntimeParams)
	pc.AfterRelease = resetSession
	pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	pc.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect to source: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, classify(fmt.Errorf("connect to source: %w", err))
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 10 * time.Second
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 10 * time.Millisecond
	}
	return &Source{cfg: cfg, pool: pool, log: log}, nil
}

// Close releases the pool.
func (s *Source) Close() { s.pool.Close() }

// Pool exposes the read pool for tests.
func (s *Source) Pool() *pgxpool.Pool { return s.pool }

// Tables lists the source's tables.
func (s *Source) Tables(ctx context.Context) ([]change.TableID, error) {
	var ids []change.TableID
	err := s.read(ctx, func(q queryer) (err error) {
		ids, err = ListTables(ctx, q)
		return err
	})
	return ids, classify(err)
}

// Describe reads one table's shape.
func (s *Source) Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error) {
	var t *change.Table
	err := s.read(ctx, func(q queryer) (err error) {
		t, err = Describe(ctx, q, id, keyCols)
		return err
	})
	return t, classify(err)
}

// DescribeMany describes tables in one read transaction: see
// source.ManyDescriber.
func (s *Source) DescribeMany(ctx context.Context, ids []change.TableID, keys map[change.TableID][]string) ([]*change.Table, []error, error) {
	var tables []*change.Table
	var errs []error
	err := s.read(ctx, func(q queryer) (err error) {
		tables, errs, err = DescribeMany(ctx, q, ids, keys)
		return err
	})
	if err != nil {
		return nil, nil, classify(err)
	}
	for i := range errs {
		errs[i] = classify(errs[i])
	}
	return tables, errs, nil
}

// EstimateTable sizes a table as a backfill of it would read it.
func (s *Source) EstimateTable(ctx context.Context, id change.TableID) (TableSize, error) {
	var size TableSize
	err := s.read(ctx, func(q queryer) (err error) {
		size, err = EstimateTable(ctx, q, id)
		return err
	})
	return size, classify(err)
}

// Confirm records that the destination committed everything up to lsn; the
// next status update reports it to the server, which may then recycle WAL.
func (s *Source) Confirm(lsn change.LSN) {
	for {
		cur := s.confirmed.Load()
		if uint64(lsn) <= cur || s.confirmed.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

// WantPosition asks the stream to report progress until it has passed lsn.
func (s *Source) WantPosition(lsn change.LSN) {
	for {
		cur := s.want.Load()
		if uint64(lsn) <= cur || s.want.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

// PrepareCapture creates the publication or sets its tables. It
// publishes partitioned tables via their root: their rows' changes then
// reach the stream as changes of the root, the one object it streams.
func (s *Source) PrepareCapture(ctx context.Context, tables []change.TableID) error {
	if s.cfg.PublicationExisting {
		return s.checkPublication(ctx, tables)
	}
	var viaRoot *bool // nil: no such publication
	err := s.read(ctx, func(q queryer) error {
		return q.QueryRow(ctx, "SELECT pubviaroot FROM pg_publication WHERE pubname = $1", s.cfg.Publication).Scan(&viaRoot)
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return classify(fmt.Errorf("look up publication %s: %w", s.cfg.Publication, err))
	}
	exists := viaRoot != nil
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = quoteTable(t)
	}
	pub := quoteIdent(s.cfg.Publication)
	if exists && !*viaRoot {
		// A publication made without it (by hand, say) would publish a
		// partition's changes under the partition's name, which is no
		// object: they would be lost.
		if err := s.write(ctx, "ALTER PUBLICATION "+pub+" SET (publish_via_partition_root = true)"); err != nil {
			return classify(fmt.Errorf("set publish_via_partition_root on publication %s: %w", s.cfg.Publication, err))
		}
	}
	var sql string
	switch {
	case !exists && len(tables) == 0:
		sql = "CREATE PUBLICATION " + pub + " WITH (publish_via_partition_root = true)"
	case !exists:
		sql = "CREATE PUBLICATION " + pub + " FOR TABLE " + strings.Join(names, ", ") + " WITH (publish_via_partition_root = true)"
	case len(tables) == 0:
		return nil
	default:
		sql = "ALTER PUBLICATION " + pub + " SET TABLE " + strings.Join(names, ", ")
	}
	if err := s.write(ctx, sql); err != nil {
		return classify(fmt.Errorf("set up publication %s: %w", s.cfg.Publication, err))
	}
	return nil
}

// LogState reads the replication slot's state.
func (s *Source) LogState(ctx context.Context) (source.LogState, error) {
	info := source.LogState{Name: "replication slot " + s.cfg.Slot, Reset: "re-creates the slot"}
	var confirmed *string
	var retained *int64
	var walStatus *string
	err := s.read(ctx, func(q queryer) error {
		return q.QueryRow(ctx, `
			SELECT confirmed_flush_lsn::text,
			       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,
			       wal_status
			FROM pg_replication_slots WHERE slot_name = $1`, s.cfg.Slot).Scan(&confirmed, &retained, &walStatus)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return info, nil
	}
	if err != nil {
		return info, classify(fmt.Errorf("read replication slot %s: %w", s.cfg.Slot, err))
	}
	info.Exists = true
	if confirmed != nil {
		info.Confirmed, _ = change.ParseLSN(*confirmed)
	}
	if retained != nil {
		info.RetainedBytes = *retained
	}
	if walStatus != nil && *walStatus == "lost" {
		info.Invalidated, info.InvalidatedReason = true, "wal_status is lost"
	}
	return info, nil
}

// EnsureLog creates the replication slot when it is missing. It reports
// whether it created one.
func (s *Source) EnsureLog(ctx context.Context) (bool, error) {
	info, err := s.LogState(ctx)
	if err != nil {
		return false, err
	}
	if info.Invalidated {
		return false, &PermanentError{Err: fmt.Errorf("replication slot %s is invalidated (%s)", s.cfg.Slot, info.InvalidatedReason), Hint: slotGoneHint}
	}
	if info.Exists {
		return false, nil
	}
	conn, err := s.replicationConn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = pglogrepl.CreateReplicationSlot(ctx, conn, s.cfg.Slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "NOEXPORT_SNAPSHOT"})
	if err != nil {
		return false, classify(fmt.Errorf("create replication slot %s: %w", s.cfg.Slot, err))
	}
	s.log.Info("created replication slot", logkey.Slot(s.cfg.Slot))
	return true, nil
}

// DropLog removes the replication slot if it exists.
func (s *Source) DropLog(ctx context.Context) error {
	err := s.write(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", s.cfg.Slot)
	if err != nil {
		return classify(fmt.Errorf("drop replication slot %s: %w", s.cfg.Slot, err))
	}
	return nil
}

func (s *Source) replicationConn(ctx context.Context) (*pgconn.PgConn, error) {
	cc, err := pgconn.ParseConfig(s.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse source DSN: %s", redactErr(err))
	}
	// pgoutput prints every value with the walsender's settings: the
	// same ones as the pool's.
	withSessionParams(cc.RuntimeParams)
	cc.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, classify(fmt.Errorf("open replication connection: %w", err))
	}
	return conn, nil
}

// redactErr keeps a DSN parse error from echoing the DSN and its password.
// pgx's error wraps a cause for some problems and only carries a message
// for others (an invalid port wraps nothing), so both are read.
func redactErr(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) || pe == nil {
		return "invalid DSN"
	}
	if cause := errors.Unwrap(pe); cause != nil {
		return "invalid DSN (" + cause.Error() + ")"
	}
	// The message follows the quoted DSN: "cannot parse `…`: invalid port".
	text := pe.Error()
	i := strings.LastIndex(text, "`: ")
	if i < 0 || strings.ContainsRune(text[i+3:], '`') {
		return "invalid DSN"
	}
	return "invalid DSN (" + text[i+3:] + ")"
}
