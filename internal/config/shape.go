package config

// Stage 1: the file's shape. The raw types mirror the YAML key for key;
// every leaf is a scalar holding the text as written, so a value that is not
// yet expanded (chunk_size: ${CHUNK}) still decodes, and its conversion error
// can name the key.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/tidemark/tidemark/internal/suggest"
)

type rawConfig struct {
	Metadata       scalar             `yaml:"metadata"`
	API            rawAPI             `yaml:"api"`
	Log            rawLog             `yaml:"log"`
	Streams        []rawStream        `yaml:"streams"`
	Batch          rawBatchSettings   `yaml:"batch"`
	ResourceGroups []rawResourceGroup `yaml:"resource_groups"`
	Connections    []rawConnection    `yaml:"connections"`
	Tasks          []rawTask          `yaml:"tasks"`
	Cluster        *rawCluster        `yaml:"cluster"`
}

type rawCluster struct {
	Node      scalar `yaml:"node"`
	Host      scalar `yaml:"host"`
	Lease     scalar `yaml:"lease"`
	Advertise scalar `yaml:"advertise"`
}

type rawAPI struct {
	Listen       scalar     `yaml:"listen"`
	AllowedHosts []scalar   `yaml:"allowed_hosts"`
	Tokens       []rawToken `yaml:"tokens"`
}

type rawToken struct {
	Name  scalar `yaml:"name"`
	Token scalar `yaml:"token"`
	Role  scalar `yaml:"role"`
}

type rawLog struct {
	Level  scalar `yaml:"level"`
	Format scalar `yaml:"format"`
}

type rawStream struct {
	Name                scalar         `yaml:"name"`
	Source              rawSource      `yaml:"source"`
	Destination         rawDestination `yaml:"destination"`
	Include             []scalar       `yaml:"include"`
	Exclude             []scalar       `yaml:"exclude"`
	IncludeFutureTables scalar         `yaml:"include_future_tables"`
	Keys                rawKeys        `yaml:"keys"`
	Backfill            rawBackfill    `yaml:"backfill"`
	Batch               rawBatch       `yaml:"batch"`
	Retry               rawRetry       `yaml:"retry"`
	LagWarn             scalar         `yaml:"lag_warn"`
	DiscoveryInterval   scalar         `yaml:"discovery_interval"`
	Node                scalar         `yaml:"node"`
}

type rawSource struct {
	Type            scalar          `yaml:"type"`
	DSN             scalar          `yaml:"dsn"`
	Publication     scalar          `yaml:"publication"`
	PublicationMode scalar          `yaml:"publication_mode"`
	Slot            scalar          `yaml:"slot"`
	StatusInterval  scalar          `yaml:"status_interval"`
	WALWarnBytes    scalar          `yaml:"wal_warn_bytes"`
	ReadTimeouts    rawReadTimeouts `yaml:"read_timeouts"`
	ServerID        scalar          `yaml:"server_id"`
}

type rawReadTimeouts struct {
	Statement         scalar `yaml:"statement"`
	Lock              scalar `yaml:"lock"`
	IdleInTransaction scalar `yaml:"idle_in_transaction"`
}

type rawDestination struct {
	Type         scalar `yaml:"type"`
	DSN          scalar `yaml:"dsn"`
	Path         scalar `yaml:"path"`
	Format       scalar `yaml:"format"`
	MaxFileBytes scalar `yaml:"max_file_bytes"`
	// NATS JetStream.
	URL             scalar `yaml:"url"`
	NATSStream      scalar `yaml:"stream"`
	SubjectPrefix   scalar `yaml:"subject_prefix"`
	Credentials     scalar `yaml:"credentials"`
	TLSCA           scalar `yaml:"tls_ca"`
	TLSCert         scalar `yaml:"tls_cert"`
	TLSKey          scalar `yaml:"tls_key"`
	MaxMessageBytes scalar `yaml:"max_message_bytes"`
	// Kafka (tls_ca, tls_cert, tls_key and max_message_bytes too).
	Brokers         []scalar `yaml:"brokers"`
	Topic           scalar   `yaml:"topic"`
	CheckpointTopic scalar   `yaml:"checkpoint_topic"`
	Partitions      scalar   `yaml:"partitions"`
	TLS             scalar   `yaml:"tls"`
	SASLMechanism   scalar   `yaml:"sasl_mechanism"`
	SASLUsername    scalar   `yaml:"sasl_username"`
	SASLPassword    scalar   `yaml:"sasl_password"`
}

type rawBackfill struct {
	Mode             scalar   `yaml:"mode"`
	Exclude          []scalar `yaml:"exclude"`
	MaxConcurrent    scalar   `yaml:"max_concurrent"`
	ChunkSize        scalar   `yaml:"chunk_size"`
	RowsPerSecond    scalar   `yaml:"rows_per_second"`
	WindowMaxChanges scalar   `yaml:"window_max_changes"`
	ChunkWriteTarget scalar   `yaml:"chunk_write_target"`
	SnapshotMaxHold  scalar   `yaml:"snapshot_max_hold"`
	Verify           scalar   `yaml:"verify"`
}

type rawBatch struct {
	MaxChanges scalar `yaml:"max_changes"`
	MaxDelay   scalar `yaml:"max_delay"`
}

type rawRetry struct {
	Initial scalar `yaml:"initial"`
	Max     scalar `yaml:"max"`
}

type rawBatchSettings struct {
	Timezone           scalar `yaml:"timezone"`
	OutputLookbackDays scalar `yaml:"output_lookback_days"`
	ConfirmAbove       scalar `yaml:"confirm_above"`
	LogLimitBytes      scalar `yaml:"log_limit_bytes"`
}

type rawResourceGroup struct {
	Name        scalar `yaml:"name"`
	Concurrency scalar `yaml:"concurrency"`
}

type rawConnection struct {
	Name scalar `yaml:"name"`
	Type scalar `yaml:"type"`
	DSN  scalar `yaml:"dsn"`
	Path scalar `yaml:"path"`
}

type rawTask struct {
	Name           scalar      `yaml:"name"`
	Project        scalar      `yaml:"project"`
	Owner          scalar      `yaml:"owner"`
	Output         scalar      `yaml:"output"`
	Type           scalar      `yaml:"type"`
	Command        scalar      `yaml:"command"`
	Connection     scalar      `yaml:"connection"`
	SQL            scalar      `yaml:"sql"`
	Schedule       scalar      `yaml:"schedule"`
	Timezone       scalar      `yaml:"timezone"`
	DependsOn      []scalar    `yaml:"depends_on"`
	SelfDependent  scalar      `yaml:"self_dependent"`
	Params         rawParams   `yaml:"params"`
	Outputs        rawParams   `yaml:"outputs"`
	Env            []scalar    `yaml:"env"`
	Paused         scalar      `yaml:"paused"`
	DryRun         scalar      `yaml:"dry_run"`
	SingleInstance scalar      `yaml:"single_instance"`
	Retries        scalar      `yaml:"retries"`
	RetryBackoff   scalar      `yaml:"retry_backoff"`
	Timeout        scalar      `yaml:"timeout"`
	ResourceGroup  scalar      `yaml:"resource_group"`
	Reads          []rawRead   `yaml:"reads"`
	OnChange       rawOnChange `yaml:"on_change"`
}

// rawOnChange is a task's on_change mapping; its backfill options are
// decoded as the API's JSON request.
type rawOnChange struct {
	Action    scalar    `yaml:"action"`
	Settle    scalar    `yaml:"settle"`
	MaxPerDay scalar    `yaml:"max_per_day"`
	Backfill  yaml.Node `yaml:"backfill"`
}

// rawRead is one entry of a task's reads.
type rawRead struct {
	Stream     scalar `yaml:"stream"`
	Object     scalar `yaml:"object"`
	DateColumn scalar `yaml:"date_column"`
	Timezone   scalar `yaml:"timezone"`
	LateAfter  scalar `yaml:"late_after"`
}

// scalar is one leaf value as written. The zero scalar is an absent or null
// value.
type scalar struct {
	Value string
	Set   bool
	// Env names the environment variable the value came from; such a value
	// is taken literally, without ${} expansion.
	Env string
	// Bad describes what the file held instead of a single value ("a list",
	// "a mapping"); the build stage reports it under the key's path.
	Bad string
}

// UnmarshalYAML never fails, so that yaml.v3 drops no list element and the
// indexes of later ones stay those of the file.
func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		*s = scalar{Bad: describeTag(n.ShortTag())}
		return nil
	}
	*s = scalar{Value: n.Value, Set: true}
	return nil
}

// rawKeys is the keys mapping, table name to column list, in file order.
type rawKeys struct {
	Entries []rawKey
	Bad     string // like scalar.Bad
}

type rawKey struct {
	Table   string
	Line    int
	Columns []scalar
	Bad     string // like scalar.Bad, for the column list
}

func (k *rawKeys) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		k.Bad = describeTag(n.ShortTag())
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		e := rawKey{Table: key.Value, Line: key.Line}
		if key.Kind != yaml.ScalarNode {
			e.Table = "?"
			e.Bad = "a table name that is not plain text"
		} else if value.Kind != yaml.SequenceNode && value.ShortTag() != "!!null" {
			e.Bad = describeTag(value.ShortTag())
		} else if err := value.Decode(&e.Columns); err != nil {
			return err // cannot happen: scalars never fail
		}
		k.Entries = append(k.Entries, e)
	}
	return nil
}

// rawParams is a params or outputs mapping, name to value, in file order.
type rawParams struct {
	Entries []rawParam
	Bad     string // like scalar.Bad
}

type rawParam struct {
	Name  string
	Line  int
	Value scalar // null is the empty value
	Bad   string // what is wrong with the name, if anything
}

func (ps *rawParams) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		if n.ShortTag() != "!!null" {
			ps.Bad = describeTag(n.ShortTag())
		}
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if value.Kind == yaml.AliasNode && value.Alias != nil {
			value = value.Alias
		}
		e := rawParam{Name: key.Value, Line: key.Line}
		switch {
		case key.ShortTag() == "!!merge":
			e.Name, e.Bad = "<<", "merge keys are not supported here: list each entry"
		case key.Kind != yaml.ScalarNode:
			e.Name, e.Bad = "?", "the name is not plain text: write name: value"
		case value.ShortTag() == "!!null":
			e.Value = scalar{Set: true}
		default:
			_ = e.Value.UnmarshalYAML(value) // never fails
		}
		ps.Entries = append(ps.Entries, e)
	}
	return nil
}

// decode reads the file's shape. fatal is set when the YAML could not be
// read at all; otherwise raw holds whatever decoded, problems the keys that
// did not, and broken the paths whose content is unknown because they did
// not decode: later stages' complaints about them are noise.
//
// It decodes twice. The first pass, with yaml.v3's KnownFields, finds
// unknown keys, keys set twice and values of the wrong kind, and yaml.v3
// names their lines; the node tree finds their paths. yaml.v3 drops a list
// element that fails to decode, shifting the indexes of the elements after
// it, so the second pass decodes the data from the node tree with those
// faults removed.
func decode(data []byte) (raw rawConfig, problems []Problem, broken []string, fatal bool) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return raw, []Problem{syntaxProblem(err)}, nil, true
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var check rawConfig
	err := dec.Decode(&check)
	var te *yaml.TypeError
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.As(err, &te):
		idx := indexNodes(&root)
		for _, msg := range te.Errors {
			p, b := idx.translate(msg)
			problems = append(problems, p)
			broken = append(broken, b...)
		}
	default:
		return raw, []Problem{syntaxProblem(err)}, nil, true
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		problems = append(problems, Problem{Message: "the file holds more than one YAML document: keep only the first (remove ---)"})
	}
	repair(&root, map[*yaml.Node]bool{})
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		top := root.Content[0]
		for _, list := range []string{"streams", "resource_groups", "connections", "tasks"} {
			repairElements(child(top, list))
		}
		repairElements(child(child(top, "api"), "tokens"))
		if tasks := child(top, "tasks"); tasks != nil && tasks.Kind == yaml.SequenceNode {
			for _, t := range tasks.Content {
				repairElements(child(t, "reads"))
			}
		}
	}
	_ = root.Decode(&raw) // the first pass reported whatever fails here
	return raw, problems, broken, false
}

// repair removes the later of two equal keys from every mapping, as
// yaml.v3 decodes nothing of a mapping with a duplicate key. It leaves
// streams' keys and tasks' params and outputs mappings alone: rawKeys and
// rawParams read those themselves and later stages report an entry listed
// twice.
func repair(n *yaml.Node, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	if n.Kind == yaml.MappingNode {
		keys := map[string]bool{}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			id := fmt.Sprint(k.Kind, k.Value)
			if keys[id] {
				continue
			}
			keys[id] = true
			kept = append(kept, k, v)
			if ownMapping[k.Value] && v.Kind == yaml.MappingNode {
				seen[v] = true
				for _, c := range v.Content {
					repair(c, seen)
				}
			}
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		repair(c, seen)
	}
	repair(n.Alias, seen)
}

// repairElements replaces the elements of a list of mappings that are no
// mappings, nulls included, by empty mappings.
func repairElements(n *yaml.Node) {
	if n == nil || n.Kind != yaml.SequenceNode {
		return
	}
	for i, c := range n.Content {
		if c.Kind == yaml.AliasNode && c.Alias != nil {
			c = c.Alias
		}
		if c.Kind != yaml.MappingNode {
			n.Content[i] = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: c.Line}
		}
	}
}

// ownMapping lists the keys whose mappings decode themselves.
var ownMapping = map[string]bool{"keys": true, "params": true, "outputs": true}

// child returns the value of key in mapping n, following aliases.
func child(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

func syntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := reLine.FindStringSubmatch(msg); m != nil {
		return Problem{Path: "line " + m[1], Message: m[2] + ": fix the YAML syntax"}
	}
	return Problem{Message: msg}
}

var (
	reLine     = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	reUnknown  = regexp.MustCompile(`^line (\d+): field (.*) not found in type (\S+)$`)
	reWrongTyp = regexp.MustCompile("(?s)^line (\\d+): cannot unmarshal (!!\\w+)(?: `.*`)? into (\\S+)$")
	reTwice    = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
	reBackquot = regexp.MustCompile("`[^`]*`")
)

// nodeIndex finds the key path of a line that yaml.v3 reports an error at.
type nodeIndex struct {
	keys   map[lineKey]string // key node → its path
	values map[int][]valueAt  // line → value nodes that start on it
}

type lineKey struct {
	line int
	key  string
}

type valueAt struct {
	tag, path string
}

func indexNodes(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{keys: map[lineKey]string{}, values: map[int][]valueAt{}}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		idx.walk(root.Content[0], "")
	}
	return idx
}

func (idx *nodeIndex) walk(n *yaml.Node, path string) {
	idx.values[n.Line] = append(idx.values[n.Line], valueAt{tag: n.ShortTag(), path: path})
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := redactLike(k.Value)
			if path != "" {
				p = path + "." + p
			}
			lk := lineKey{k.Line, k.Value}
			if _, ok := idx.keys[lk]; !ok {
				idx.keys[lk] = p
			}
			idx.walk(n.Content[i+1], p)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			idx.walk(c, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// at returns the path of the one value with the given tag on a line, or
// "line N" when there is none or more than one.
func (idx *nodeIndex) at(line int, tag string) string {
	path, found := "", 0
	for _, v := range idx.values[line] {
		if v.tag == tag && v.path != "" {
			path, found = v.path, found+1
		}
	}
	if found != 1 {
		return "line " + strconv.Itoa(line)
	}
	return path
}

func (idx *nodeIndex) key(line int, key string) string {
	if p, ok := idx.keys[lineKey{line, key}]; ok {
		return p
	}
	return "line " + strconv.Itoa(line)
}

// translate turns one of yaml.v3's decoding errors into a Problem naming
// the key, and returns the path left undecoded by it, if any. It never
// repeats a value: that could be a DSN.
func (idx *nodeIndex) translate(msg string) (p Problem, broken []string) {
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Path: idx.key(line, m[2]), Message: unknownKeyMessage(m[1], m[2], m[3])}, nil
	}
	if m := reTwice.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Path: idx.key(line, m[2]),
			Message: fmt.Sprintf("set twice (lines %s and %s): keep one", m[3], m[1])}, nil
	}
	if m := reWrongTyp.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		path := idx.at(line, m[2])
		return Problem{Path: path,
			Message: fmt.Sprintf("expected %s, found %s", describeType(m[3]), describeTag(m[2]))}, []string{path}
	}
	msg = reBackquot.ReplaceAllString(msg, "")
	if m := reLine.FindStringSubmatch(msg); m != nil {
		return Problem{Path: "line " + m[1], Message: m[2]}, nil
	}
	return Problem{Message: msg}, nil
}

func describeTag(tag string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	}
	return "a single value"
}

func describeType(typ string) string {
	if strings.HasPrefix(typ, "[]") {
		return "a list"
	}
	return "a mapping of keys to values"
}

// rawTypes lists the raw structs by the type name yaml.v3 reports.
var rawTypes = map[string]reflect.Type{}

func init() {
	for _, v := range []any{rawConfig{}, rawAPI{}, rawToken{}, rawLog{}, rawStream{},
		rawSource{}, rawReadTimeouts{}, rawDestination{}, rawBackfill{}, rawBatch{}, rawRetry{},
		rawBatchSettings{}, rawResourceGroup{}, rawConnection{}, rawTask{}, rawRead{}, rawOnChange{}} {
		t := reflect.TypeOf(v)
		rawTypes[t.String()] = t
	}
}

func unknownKeyMessage(line, key, typ string) string {
	msg := "unknown key (line " + line + ")"
	t, ok := rawTypes[typ]
	if !ok {
		return msg
	}
	var valid []string
	for f := range t.Fields() {
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if d := distance(key, name); d <= 2 && d*3 <= len(name) {
			return msg + ": did you mean " + name + "?"
		}
		valid = append(valid, name)
	}
	return msg + ": use one of " + strings.Join(valid, ", ")
}

// distance is the number of single-character edits that turn a into b.
func distance(a, b string) int { return suggest.Distance(a, b) }
