package config

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The configuration knows a source or destination type only through its
// kind, which the type's own package registers (internal/source and
// internal/sink do it for each type they hold): the keys only that type
// reads, its defaults and its validation. A program links the types it
// supports by importing internal/source/all and internal/sink/all; a type
// not linked is "not supported".

// SourceKind is what the configuration knows of one source type.
type SourceKind struct {
	// Name is the value of source.type.
	Name string
	// Keys are the source keys only this type reads; another type's
	// source refuses them.
	Keys []string
	// OthersNote says why the keys of other types do not apply to this
	// one, shown with their refusal ("" for no reason given).
	OthersNote string
	// Defaults fills in what the type derives when the file leaves it
	// out (nil: nothing).
	Defaults func(s *Stream)
	// Validate checks the type's keys of a stream's source, at path
	// ("streams[i].source").
	Validate func(v *Checker, path string, s *Stream)
}

// DestinationKind is what the configuration knows of one destination type.
type DestinationKind struct {
	// Name is the value of destination.type.
	Name string
	// Keys are the destination keys this type reads besides type; a key
	// another type reads is refused.
	Keys []string
	// Verify says whether the type can be read back: backfill.verify is
	// on by default where it can, and refused where it cannot.
	Verify bool
	// Validate checks the type's keys of a destination at path
	// ("streams[i].destination").
	Validate func(v *Checker, path string, d *Destination)
}

var (
	kindsMu      sync.RWMutex
	sourceKinds  = map[string]SourceKind{}
	destinations = map[string]DestinationKind{}
)

// RegisterSource adds a source type's kind. It panics on a duplicate or
// incomplete one: both are programming errors found at start.
func RegisterSource(k SourceKind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if k.Name == "" || k.Validate == nil {
		panic(fmt.Sprintf("config: incomplete source kind %q", k.Name))
	}
	if _, dup := sourceKinds[k.Name]; dup {
		panic(fmt.Sprintf("config: source kind %q registered twice", k.Name))
	}
	sourceKinds[k.Name] = k
}

// RegisterDestination adds a destination type's kind, as RegisterSource.
func RegisterDestination(k DestinationKind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if k.Name == "" || k.Validate == nil {
		panic(fmt.Sprintf("config: incomplete destination kind %q", k.Name))
	}
	if _, dup := destinations[k.Name]; dup {
		panic(fmt.Sprintf("config: destination kind %q registered twice", k.Name))
	}
	destinations[k.Name] = k
}

func sourceKind(name string) (SourceKind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := sourceKinds[name]
	return k, ok
}

func destinationKind(name string) (DestinationKind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := destinations[name]
	return k, ok
}

// sourceTypes lists the source types as messages offer them: the default
// first, then the others sorted.
func sourceTypes() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := sortedKeys(sourceKinds)
	if i := slices.Index(out, defaultSourceType); i > 0 {
		out = append(append([]string{defaultSourceType}, out[:i]...), out[i+1:]...)
	}
	return out
}

// destinationTypes lists the destination types, sorted.
func destinationTypes() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	return sortedKeys(destinations)
}

func sortedKeys[K any](m map[string]K) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// sourceKeyOwners lists the source types that read key as their own.
func sourceKeyOwners(key string) []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	var out []string
	for _, n := range sortedKeys(sourceKinds) {
		if slices.Contains(sourceKinds[n].Keys, key) {
			out = append(out, n)
		}
	}
	return out
}

// destinationKeyOwners lists the destination types that read key.
func destinationKeyOwners(key string) []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	var out []string
	for _, n := range sortedKeys(destinations) {
		if slices.Contains(destinations[n].Keys, key) {
			out = append(out, n)
		}
	}
	return out
}

// sourceKeys refuses, at build time, the keys of a source that only other
// types read: a mysql source has no slot, a postgres one no server_id.
func (b *builder) sourceKeys(p string, r *rawSource) {
	typ := strings.TrimSpace(r.Type.Value)
	if typ == "" {
		typ = defaultSourceType
	}
	k, ok := sourceKind(typ)
	if !ok {
		return // the type is reported by validation
	}
	for _, key := range []struct {
		name string
		s    scalar
	}{{"publication", r.Publication}, {"publication_mode", r.PublicationMode}, {"slot", r.Slot}, {"status_interval", r.StatusInterval}, {"server_id", r.ServerID}} {
		owners := sourceKeyOwners(key.name)
		if !key.s.Set || len(owners) == 0 || slices.Contains(owners, typ) {
			continue
		}
		note := ""
		if k.OthersNote != "" {
			note = " (" + k.OthersNote + ")"
		}
		b.add(p+"."+key.name, "applies to %s sources only%s: remove it", strings.Join(owners, " and "), note)
	}
}

// destinationKeys refuses the keys of a destination that only other types
// read, pointing to the keys its own type reads.
func (v *Checker) destinationKeys(p string, k DestinationKind, d *Destination) {
	for _, key := range []struct{ name, value string }{{"dsn", d.DSN}, {"path", d.Path}, {"format", d.Format},
		{"max_file_bytes", strconv.FormatInt(d.MaxFileBytes, 10)}, {"url", d.URL}, {"stream", d.NATSStream},
		{"subject_prefix", d.SubjectPrefix}, {"credentials", d.Credentials}, {"tls_ca", d.TLSCA}, {"tls_cert", d.TLSCert},
		{"tls_key", d.TLSKey}, {"max_message_bytes", strconv.FormatInt(d.MaxMessageBytes, 10)},
		{"brokers", strings.Join(d.Kafka.Brokers, ",")}, {"topic", d.Kafka.Topic}, {"checkpoint_topic", d.Kafka.CheckpointTopic},
		{"partitions", strconv.FormatInt(d.Kafka.Partitions, 10)}, {"tls", strconv.FormatBool(d.Kafka.TLS)},
		{"sasl_mechanism", d.Kafka.SASLMechanism}, {"sasl_username", d.Kafka.SASLUsername}, {"sasl_password", d.Kafka.SASLPassword}} {
		if key.value == "0" || key.value == "false" {
			key.value = ""
		}
		owners := destinationKeyOwners(key.name)
		if key.value == "" || slices.Contains(k.Keys, key.name) || len(owners) == 0 {
			continue
		}
		use := ""
		if len(k.Keys) > 0 {
			use = ", or use " + orList(k.Keys)
		}
		v.add(p+"."+key.name, "only %s destinations have a %s: remove it%s", strings.Join(owners, " and "), key.name, use)
	}
}
