package sink

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/genexpr"
)

// Type is one kind of destination: everything tidemark knows of it outside
// its own package. Each destination package registers its Type in an init
// function; a program links the destinations it supports by importing
// internal/sink/all.
type Type struct {
	// Name is the value of a stream's destination.type.
	Name string
	// Title names the type in messages ("PostgreSQL").
	Title string
	// Generated is the dialect of the stored generated columns' expressions
	// the destination computes itself (see Computer); 0 computes none.
	Generated genexpr.Dialect
	// Keys are the destination keys the type reads besides type.
	Keys []string
	// Validate checks a destination's keys (see config.DestinationKind).
	Validate func(v *config.Checker, path string, d *config.Destination)
	// Open connects to the destination.
	Open func(ctx context.Context, d config.Destination) (Sink, error)
	// Doctor checks the destination for one stream and reads the position
	// it committed; what goes wrong is a failed check, never an error.
	Doctor func(ctx context.Context, in DoctorInput) DoctorReport
	// Example is a value of the type's Sink, a nil pointer will do: its
	// capabilities are the type's.
	Example Sink
	// Where says where a stream's destination is, for a person, without
	// secrets ("/data/out, parquet"); nil shows the redacted DSN or the
	// path.
	Where func(d config.Destination, stream string) string
}

// DoctorInput is what a destination type's checks get.
type DoctorInput struct {
	Stream      string
	Destination config.Destination
	// Key is the destination's configuration key, "streams[i].destination".
	Key string
	// Position words a committed position and its resume token in the
	// source's notation, as a check's detail says it ("the stream's
	// checkpoint is at …").
	Position func(pos change.LSN, resume string) string
}

// DoctorReport is what a destination type's checks found.
type DoctorReport struct {
	Checks []check.Check
	// Known is false when the destination could not be read; Position and
	// Resume are what it committed for the stream (0: nothing yet).
	Known    bool
	Position change.LSN
	Resume   string
}

// Can says whether the type has a capability.
func (t Type) Can(c Capability) bool { return slices.Contains(Capabilities(t.Example), c) }

var (
	mu    sync.RWMutex
	types = map[string]Type{}
)

// Register adds a destination type, and its kind to the configuration's.
// It panics on a duplicate or incomplete entry: both are programming errors
// found at start.
func Register(t Type) {
	mu.Lock()
	defer mu.Unlock()
	if t.Name == "" || t.Title == "" || t.Validate == nil || t.Open == nil || t.Doctor == nil || t.Example == nil {
		panic(fmt.Sprintf("sink: incomplete registration of type %q", t.Name))
	}
	if _, dup := types[t.Name]; dup {
		panic(fmt.Sprintf("sink: type %q registered twice", t.Name))
	}
	types[t.Name] = t
	config.RegisterDestination(config.DestinationKind{Name: t.Name, Keys: t.Keys, Verify: t.Can(ReadBack), Validate: t.Validate})
}

// Lookup returns the registered type called name.
func Lookup(name string) (Type, error) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := types[name]
	if !ok {
		return Type{}, fmt.Errorf("destination type %q is not supported (supported: %v)", name, names())
	}
	return t, nil
}

func names() []string {
	out := make([]string, 0, len(types))
	for n := range types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Open opens the destination d names, through its registered type.
func Open(ctx context.Context, d config.Destination) (Sink, error) {
	t, err := Lookup(d.Type)
	if err != nil {
		return nil, err
	}
	s, err := t.Open(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("open destination: %w", err)
	}
	return s, nil
}

// Where says where stream's destination d is, for a person, without
// secrets (Type.Where).
func Where(d config.Destination, stream string) string {
	if t, err := Lookup(d.Type); err == nil && t.Where != nil {
		return t.Where(d, stream)
	}
	if d.DSN != "" {
		return config.Redact(d.DSN)
	}
	return d.Path
}

// Refusal says why a destination of type typ cannot do what (an option or
// request) that needs capability c, naming the type, and what to do
// (fix); "" when it can, or when the type is not registered (the
// configuration reports that).
func Refusal(typ string, c Capability, what, fix string) string {
	t, err := Lookup(typ)
	if err != nil || t.Can(c) {
		return ""
	}
	return fmt.Sprintf("%s needs a destination that can %s, and a %s destination cannot: %s", what, c, typ, fix)
}
