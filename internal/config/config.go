// Package config reads tidemark's configuration: one YAML file whose
// values may reference environment variables, a few environment overrides,
// and validation whose errors name the offending key.
//
// Reading happens in three stages:
//
//  1. shape.go decodes the file into raw structs that mirror it key for key
//     (unknown keys are errors); every leaf is still an unexpanded string.
//  2. load.go applies the environment overrides and build.go expands
//     ${VAR} references, converts the leaves to their Go types and fills in
//     the defaults.
//  3. validate.go checks the resulting Config as a whole.
//
// Every stage collects all of its problems; Parse and Load return them
// together as a *ValidationError. A DSN or token never appears in an error.
// See docs/config.md for every key.
//
// Task commands, SQL and parameter values are taken literally, without
// ${VAR} expansion: their ${…} are scheduling expressions (${bizdate})
// rendered for each task instance.
package config

import (
	"log/slog"
	"strings"
	"time"
	_ "time/tzdata" // time zones of task schedules, also where the system has no zoneinfo

	"github.com/tidemark/tidemark/internal/batch/dag"
	"github.com/tidemark/tidemark/internal/change"
)

// Environment variables that override the file.
const (
	EnvMetadata = "TIDEMARK_METADATA"  // replaces metadata
	EnvListen   = "TIDEMARK_LISTEN"    // replaces api.listen
	EnvAPIToken = "TIDEMARK_API_TOKEN" // adds an API token named EnvTokenName
	// EnvAPITokenRole is the role of EnvAPIToken's token, DefaultEnvTokenRole
	// when unset.
	EnvAPITokenRole = "TIDEMARK_API_TOKEN_ROLE"
	EnvNode         = "TIDEMARK_NODE" // replaces cluster.node (and makes a cluster section)
)

// EnvTokenName is the name of the API token that EnvAPIToken adds.
const EnvTokenName = "env"

// Values of the enumerated keys.
const (
	TypePostgres = "postgres" // source.type, destination.type and connections[].type
	TypeSQLite   = "sqlite"   // destination.type and connections[].type
	TypeMySQL    = "mysql"    // source.type: MySQL or MariaDB

	PublicationManaged  = "managed"  // source.publication_mode: tidemark's own
	PublicationExisting = "existing" // source.publication_mode: a DBA's, used as it is

	BackfillAutomatic = "automatic"
	BackfillManual    = "manual"

	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"

	FormatAuto = "auto" // text on a terminal, JSON otherwise
	FormatJSON = "json"
	FormatText = "text"
)

// Config is a validated configuration with every default filled in.
type Config struct {
	// Metadata is where tidemark keeps its own state: "sqlite://PATH" or a
	// postgres:// URL.
	Metadata string
	API      API
	Log      Log
	Streams  []Stream

	// Batch holds the settings of recurring tasks.
	Batch BatchSettings
	// ResourceGroups are the worker pools task instances run in, in file
	// order; a group named DefaultResourceGroup is always among them.
	ResourceGroups []ResourceGroup
	// Connections are the databases sql tasks run against.
	Connections []Connection
	// Tasks are the recurring tasks in file order, their upstream IDs
	// resolved and their schedules parsed.
	Tasks []dag.Task

	// Cluster, when set, makes this daemon one node of several on one
	// PostgreSQL metadata store (docs/cluster.md); nil runs one daemon.
	Cluster *Cluster
}

// Cluster configures this daemon as one node of several.
type Cluster struct {
	// Node names this node, unique among the live nodes.
	Node string
	// Host identifies the machine this node's task processes run on; nodes
	// of one host may end each other's orphaned processes. Defaults to the
	// host name.
	Host string
	// Lease is how long a node's streams and batch lead outlive its last
	// heartbeat: a node killed or cut off loses them after at most this.
	Lease time.Duration
	// Advertise is the base URL other nodes reach this node's API at, to
	// forward requests for what it runs.
	Advertise string
}

// DefaultResourceGroup is the resource group of a task that names none; it
// exists with concurrency 4 unless the file declares it.
const DefaultResourceGroup = "default"

// DefaultProject is the project of a task that names none.
const DefaultProject = "default"

// BatchSettings configures recurring tasks as a whole.
type BatchSettings struct {
	// Timezone is the time zone of schedules whose task names none, loaded
	// from TimezoneName (an IANA name such as Europe/Paris).
	Timezone     *time.Location
	TimezoneName string
	// OutputLookbackDays bounds how far back an instance looks for the
	// output parameters of its upstream tasks' runs.
	OutputLookbackDays int
	// ConfirmAbove is the number of instances above which a backfill plan
	// needs to be confirmed.
	ConfirmAbove int
	// LogLimitBytes is how much of each attempt's log is kept.
	LogLimitBytes int
}

// ResourceGroup is a worker pool: at most Concurrency of its task instances
// run at once.
type ResourceGroup struct {
	Name        string
	Concurrency int
}

// Connection is a database that sql tasks run against.
type Connection struct {
	Name string // unique, [a-z][a-z0-9_]*
	Type string // TypePostgres or TypeSQLite
	DSN  string // postgres:// URL, for TypePostgres
	Path string // database file, for TypeSQLite
}

// API configures the HTTP API.
type API struct {
	Listen string // host:port
	// AllowedHosts are the host names, IP addresses and IP networks (CIDR)
	// a request's Host may name besides loopback and the listen host.
	AllowedHosts []string
	Tokens       []Token
}

// Token is one bearer token the API accepts, named for audit logs.
type Token struct {
	Name  string
	Token string
	Role  Role
}

// Log configures logging.
type Log struct {
	Level  string // LevelDebug, LevelInfo, LevelWarn or LevelError
	Format string // FormatAuto, FormatJSON or FormatText
}

// Stream replicates the tables one source publishes into one destination.
type Stream struct {
	// Name is unique, [a-z][a-z0-9_]{0,47}; it is part of slot and
	// publication names.
	Name        string
	Source      Source
	Destination Destination
	// A table is replicated when it matches an Include pattern and no
	// Exclude pattern.
	Include []Pattern
	Exclude []Pattern
	// IncludeFutureTables adds tables created after the stream started when
	// they match.
	IncludeFutureTables bool
	// Keys gives the row key of tables whose key is not their primary key or
	// replica identity, as column names in key order.
	Keys map[change.TableID][]string
	// DateColumns are the columns that place the rows of each table on
	// business dates for the tasks that read it (tasks[].reads), gathered
	// from the tasks: what a backfill notes of the rows it changes
	// (docs/lineage.md).
	DateColumns map[change.TableID][]string
	// LateData are the date columns whose live changes to rows of old
	// dates are late data, by table (docs/lineage.md).
	LateData map[change.TableID][]LateRule
	// Node pins the stream to the cluster node of that name ("" lets any
	// node run it); a stream whose destination cannot refuse an old
	// owner's writes must be pinned (docs/cluster.md).
	Node     string
	Backfill Backfill
	Batch    Batch
	Retry    Retry
	// LagWarn: when the destination falls further behind the source than
	// this, the stream warns once (a log line and an event) until it
	// catches up again; 0 never warns.
	LagWarn time.Duration
	// DiscoveryInterval is how often a running stream looks at the
	// source's catalog for tables created or dropped since it started
	// (see docs/schema-changes.md).
	DiscoveryInterval time.Duration
}

// Source is the database a stream reads the change log of.
type Source struct {
	Type string // TypePostgres or TypeMySQL
	DSN  string // postgres:// or mysql:// URL
	// ServerID is the replica server id a MySQL source reads the binlog
	// with; 0 derives one from the stream's name.
	ServerID    uint32
	Publication string
	// PublicationMode is PublicationManaged or "" (tidemark creates the
	// publication and sets its tables) or PublicationExisting (a DBA's,
	// used as it is).
	PublicationMode string
	Slot            string
	StatusInterval  time.Duration // standby status update period
	WALWarnBytes    int64         // warn when the slot retains more WAL; 0 never warns
	ReadTimeouts    ReadTimeouts
}

// ReadTimeouts bound every transaction tidemark opens on a source: each is
// set with SET LOCAL in it.
type ReadTimeouts struct {
	Statement         time.Duration // statement_timeout
	Lock              time.Duration // lock_timeout
	IdleInTransaction time.Duration // idle_in_transaction_session_timeout
}

// Destination is where a stream writes. Its type is a registered
// destination kind (see kinds.go), which says which of the other keys it
// reads.
type Destination struct {
	Type string // a registered destination type (postgres, sqlite, files)
	DSN  string // postgres:// URL, for TypePostgres
	Path string // database file (sqlite), directory (files)
	// Format is the files destination's file format (jsonl or parquet).
	Format string
	// MaxFileBytes is the size at which a files destination starts a
	// table's next file within a batch (0: the type's default).
	MaxFileBytes int64
	// URL is the server a nats destination connects to (nats://host:port,
	// user and password allowed; several comma-separated).
	URL string
	// NATSStream is the nats destination's JetStream stream, and
	// SubjectPrefix the start of its subjects ("" each: derived from the
	// stream's name).
	NATSStream    string
	SubjectPrefix string
	// Credentials is a NATS credentials (.creds) file.
	Credentials string
	// TLSCA, TLSCert and TLSKey are PEM files: the CA that signed the
	// server's certificate, and a client certificate and its key.
	TLSCA, TLSCert, TLSKey string
	// MaxMessageBytes is the largest message an event destination sends
	// (0: the type's default); an event over it fails its object.
	MaxMessageBytes int64
	// Kafka holds the Kafka destination's own keys.
	Kafka Kafka
}

// Kafka is a Kafka destination's brokers, topics and SASL
// (docs/destinations.md, "Kafka"); its TLS files and message limit are
// the Destination's TLSCA, TLSCert, TLSKey and MaxMessageBytes.
type Kafka struct {
	Brokers []string // host:port of the bootstrap brokers
	// Topic is the template of a table's topic: {stream}, {schema} and
	// {table} are replaced.
	Topic           string
	CheckpointTopic string
	// Partitions is the partition count of topics the destination
	// creates (0: the broker's default).
	Partitions    int64
	TLS           bool
	SASLMechanism string // plain, scram-sha-256 or scram-sha-512
	SASLUsername  string
	SASLPassword  string
}

// Backfill configures copying the rows tables held before replication began.
type Backfill struct {
	Mode             string    // BackfillAutomatic or BackfillManual
	Exclude          []Pattern // tables never backfilled automatically
	MaxConcurrent    int       // tables backfilled at once
	ChunkSize        int       // rows per chunk
	RowsPerSecond    int       // 0 is unlimited
	WindowMaxChanges int       // bound on changes buffered per chunk window
	// ChunkWriteTarget shrinks chunks while live changes flow so that
	// one's write takes about this long (0: always ChunkSize).
	ChunkWriteTarget time.Duration
	// SnapshotMaxHold bounds a first start's initial load in the
	// replication slot's exported snapshot, which holds the live changes
	// and the source's cleanup back; past it the rest loads beside the
	// stream (0: never load in the snapshot; docs/backfill.md).
	SnapshotMaxHold time.Duration
	// Verify ends every backfill with a verify of what it covered,
	// recorded in its run (docs/backfill.md).
	Verify bool
}

// Batch bounds the transactions written to the destination.
type Batch struct {
	MaxChanges int
	MaxDelay   time.Duration
}

// Retry is the backoff after a failure: it starts at Initial and doubles up
// to Max.
type Retry struct {
	Initial time.Duration
	Max     time.Duration
}

// LateRule makes a live change to a row whose Column is older than After
// (its dates read in Location) late data.
type LateRule struct {
	Column   string
	After    time.Duration
	Location *time.Location
}

// Stream returns the stream with the given name.
func (c *Config) Stream(name string) (*Stream, bool) {
	for i := range c.Streams {
		if c.Streams[i].Name == name {
			return &c.Streams[i], true
		}
	}
	return nil, false
}

// Connection returns the connection with the given name.
func (c *Config) Connection(name string) (*Connection, bool) {
	for i := range c.Connections {
		if c.Connections[i].Name == name {
			return &c.Connections[i], true
		}
	}
	return nil, false
}

// ResourceGroup returns the resource group with the given name.
func (c *Config) ResourceGroup(name string) (*ResourceGroup, bool) {
	for i := range c.ResourceGroups {
		if c.ResourceGroups[i].Name == name {
			return &c.ResourceGroups[i], true
		}
	}
	return nil, false
}

// Task returns the task with the given ID ("project.name").
func (c *Config) Task(id string) (*dag.Task, bool) {
	for i := range c.Tasks {
		if c.Tasks[i].ID == id {
			return &c.Tasks[i], true
		}
	}
	return nil, false
}

// MetadataSQLite returns the file path of a sqlite:// metadata store; ok is
// false when the metadata store is PostgreSQL.
func (c *Config) MetadataSQLite() (path string, ok bool) {
	return strings.CutPrefix(c.Metadata, sqliteScheme)
}

// Includes reports whether the stream replicates table t: it matches an
// include pattern and no exclude pattern.
func (s *Stream) Includes(t change.TableID) bool {
	return matchAny(s.Include, t) && !matchAny(s.Exclude, t)
}

// AutoBackfill reports whether table t is backfilled without being asked:
// the stream includes it, the backfill mode is automatic and no
// backfill.exclude pattern matches it.
func (s *Stream) AutoBackfill(t change.TableID) bool {
	return s.Backfill.Mode == BackfillAutomatic && s.Includes(t) && !matchAny(s.Backfill.Exclude, t)
}

func matchAny(ps []Pattern, t change.TableID) bool {
	for _, p := range ps {
		if p.Match(t) {
			return true
		}
	}
	return false
}

// SlogLevel returns the level as a slog.Level (info for an unknown level).
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case LevelDebug:
		return slog.LevelDebug
	case LevelWarn:
		return slog.LevelWarn
	case LevelError:
		return slog.LevelError
	}
	return slog.LevelInfo
}
