package source

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/event"
)

// Type is one kind of source database: everything tidemark knows of it
// outside its own package. Each source package registers its Type in an
// init function; a program links the sources it supports by importing
// internal/source/all.
type Type struct {
	// Name is the value of a stream's source.type.
	Name string
	// Config is what the configuration knows of the type: its own keys,
	// defaults and validation (its Name is set from Name).
	Config config.SourceKind
	// Open connects to the source a stream's configuration names.
	Open func(ctx context.Context, cfg config.Source, opts Options, log *slog.Logger) (Source, error)
	// OpenEstimator opens a short-lived connection that sizes and
	// describes tables, for estimates asked of a stream that is not
	// running and for checking what tasks read.
	OpenEstimator func(ctx context.Context, cfg config.Source) (Estimator, error)
	// FormatPosition writes a position in the source's own notation
	// (PostgreSQL: 0/16B3748).
	FormatPosition func(change.LSN) string
	// Events says how the source appears in events (package event): its
	// connector name and the source block's own fields.
	Events Events
	// FormatResume writes a checkpoint's resume token for a person (MySQL:
	// "GTID 0-1-42"); nil for a source whose checkpoints carry none.
	FormatResume func(token string) string
	// Doctor checks the source's prerequisites for one stream (settings,
	// privileges, tables, keys, log retention), every problem with its
	// fix; it never returns an error: what goes wrong is a failed check.
	Doctor func(ctx context.Context, in DoctorInput) []check.Check
}

// Events describes a source type in events, as Debezium's connector for
// it does.
type Events struct {
	// Connector is the source block's connector: "postgresql", "mysql".
	Connector string
	// SchemaField is set when the source block names the table's schema
	// in "schema" (PostgreSQL); otherwise "db" is the schema (MySQL).
	SchemaField bool
	// Fields gives the source's own fields of an origin.
	Fields func(event.Origin) []event.Field
	// Database names the database a DSN connects to, for the source
	// block's db (nil: the table's schema is its database, as in MySQL).
	Database func(dsn string) string
}

// Encoder is the event encoder of a stream reading a source of this type
// from database db.
func (t Type) Encoder(stream, db string, tombstones bool, version string) *event.Encoder {
	return &event.Encoder{Connector: t.Events.Connector, Name: stream, DB: db, SchemaField: t.Events.SchemaField,
		Fields: t.Events.Fields, Tombstones: tombstones, Version: version}
}

// DoctorInput is what a source type's checks get.
type DoctorInput struct {
	Stream *config.Stream
	// Key is the stream's configuration key, "streams[i]".
	Key string
	// Checkpoint is what the destination committed for the stream.
	Checkpoint Checkpoint
}

// Checkpoint is the position a destination committed for a stream.
type Checkpoint struct {
	Known    bool // false when the destination could not be read
	Position change.LSN
}

// Options are a stream's settings of a source that are not configuration.
type Options struct {
	// ProbeInterval is how often a pending chunk asks the source where the
	// stream is (0: the source's default).
	ProbeInterval time.Duration
	// TakeOver ends another session still reading the stream's log (a
	// former owner's, docs/cluster.md) instead of waiting for the server to
	// notice it is gone. Only a node that holds the stream's lease sets it.
	TakeOver bool
}

// Estimator sizes and describes tables outside a running stream.
type Estimator interface {
	EstimateTable(ctx context.Context, id change.TableID) (TableSize, error)
	Describe(ctx context.Context, id change.TableID, keyCols []string) (*change.Table, error)
	Close(ctx context.Context) error
}

var (
	mu    sync.RWMutex
	types = map[string]Type{}
)

// Register adds a source type. It panics on a duplicate or incomplete
// entry: both are programming errors found at start.
func Register(t Type) {
	mu.Lock()
	defer mu.Unlock()
	if t.Name == "" || t.Open == nil || t.OpenEstimator == nil || t.FormatPosition == nil || t.Doctor == nil || t.Config.Validate == nil ||
		t.Events.Connector == "" || t.Events.Fields == nil {
		panic(fmt.Sprintf("source: incomplete registration of type %q", t.Name))
	}
	if _, dup := types[t.Name]; dup {
		panic(fmt.Sprintf("source: type %q registered twice", t.Name))
	}
	types[t.Name] = t
	t.Config.Name = t.Name
	config.RegisterSource(t.Config)
}

// Lookup returns the registered type called name.
func Lookup(name string) (Type, error) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := types[name]
	if !ok {
		return Type{}, fmt.Errorf("source type %q is not supported (supported: %v)", name, names())
	}
	return t, nil
}

// Names lists the registered source types, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return names()
}

func names() []string {
	out := make([]string, 0, len(types))
	for n := range types {
		out = append(out, n)
	}
	sort.Strings(out)
	return slices.Clip(out)
}

// Open connects to the source cfg names, through its registered type.
func Open(ctx context.Context, cfg config.Source, opts Options, log *slog.Logger) (Source, error) {
	t, err := Lookup(cfg.Type)
	if err != nil {
		return nil, err
	}
	return t.Open(ctx, cfg, opts, log)
}

// FormatCheckpoint writes a checkpoint's position and, when it has one, its
// resume token in the notation of the source type called name:
// "000003:1234 (GTID 0-1-42)".
func FormatCheckpoint(name string, pos change.LSN, token string) string {
	s := FormatPosition(name, pos)
	if t, err := Lookup(name); err == nil && t.FormatResume != nil && token != "" {
		s += " (" + t.FormatResume(token) + ")"
	}
	return s
}

// FormatPosition writes pos in the notation of the source type called
// name; a type not registered gets the number.
func FormatPosition(name string, pos change.LSN) string {
	t, err := Lookup(name)
	if err != nil {
		return fmt.Sprint(uint64(pos))
	}
	return t.FormatPosition(pos)
}
