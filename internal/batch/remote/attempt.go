// Package remote carries batch attempts between a cluster's nodes
// (docs/cluster.md): the leader's engine queues each attempt it claims in
// the metadata store, and the Worker of any node with a free slot takes
// it, runs it and writes back how it ended.
package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemark/tidemark/internal/batch/runner"
)

// Attempt is what to run, as it crosses nodes: a runner.Spec without
// secrets. A SQL task's connection goes by name and the daemon's variables
// a shell task receives go by name; the node that runs the attempt fills
// them in from its own configuration and environment (every node runs the
// same configuration).
type Attempt struct {
	Type       string             `json:"type"`
	Script     string             `json:"script,omitempty"`
	Env        []string           `json:"env,omitempty"`
	Inherit    []string           `json:"inherit,omitempty"`
	Conn       string             `json:"conn,omitempty"`
	Statements []runner.Statement `json:"statements,omitempty"`
	Timeout    time.Duration      `json:"timeout,omitempty"`
	Tag        string             `json:"tag"`
}

// Encode is spec as it is queued. env holds tidemark's own variables only;
// inherit names the daemon's.
func Encode(spec runner.Spec, inherit []string) (string, error) {
	a := Attempt{Type: spec.Type, Script: spec.Script, Env: spec.Env, Inherit: inherit,
		Statements: spec.Statements, Timeout: spec.Timeout, Tag: spec.Tag}
	if spec.Conn != nil {
		a.Conn = spec.Conn.Name
	}
	data, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encode attempt %s: %w", spec.Tag, err)
	}
	return string(data), nil
}

// Decode is the runner.Spec of a queued attempt on this node.
func Decode(data string, conns map[string]runner.Connection, lookupEnv func(string) (string, bool), dir string) (runner.Spec, error) {
	var a Attempt
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return runner.Spec{}, fmt.Errorf("decode a queued attempt: %w", err)
	}
	spec := runner.Spec{Type: a.Type, Script: a.Script, Statements: a.Statements, Timeout: a.Timeout, Tag: a.Tag, Dir: dir}
	for _, name := range a.Inherit {
		if v, ok := lookupEnv(name); ok {
			spec.Env = append(spec.Env, name+"="+v)
		}
	}
	spec.Env = append(spec.Env, a.Env...) // later entries win: tidemark's own
	if a.Conn != "" {
		c, found := conns[a.Conn]
		if !found {
			return spec, fmt.Errorf("connection %q is not configured on this node", a.Conn)
		}
		spec.Conn = &c
	}
	return spec, nil
}

// Result is how an attempt ended, as the node that ran it writes it.
type Result struct {
	Err      string            `json:"error,omitempty"`
	ExitCode int               `json:"exit_code"`
	Outputs  map[string]string `json:"outputs,omitempty"`
	Log      string            `json:"log,omitempty"`
	// Interrupted: the node stopped (shut down, or its lease ran out)
	// before the attempt ended; it runs again.
	Interrupted bool `json:"interrupted,omitempty"`
	// Lapsed: the task's watchdog ended it because the node did not move
	// its deadline on in time (runner.ErrLapsed): the node was frozen or
	// cut off, and may see its leases lost only after it wrote this end.
	// The attempt is lost with its node: it runs again, counted toward
	// the limit of lost runs in a row.
	Lapsed bool   `json:"lapsed,omitempty"`
	Node   string `json:"node"`
}

// ErrInterrupted marks an attempt its node ended because the node stopped.
var ErrInterrupted = errors.New("interrupted")

// RunnerResult is r as the engine sees it.
func (r Result) RunnerResult() runner.Result {
	res := runner.Result{Outputs: r.Outputs, ExitCode: r.ExitCode}
	switch {
	case r.Lapsed:
		detail := strings.TrimPrefix(strings.TrimPrefix(r.Err, runner.ErrLapsed.Error()), ": ")
		res.Err = fmt.Errorf("%w on node %s: %s", runner.ErrLapsed, r.Node, detail)
	case r.Interrupted:
		res.Err = fmt.Errorf("%w: node %s stopped while it ran", ErrInterrupted, r.Node)
	case r.Err != "":
		res.Err = errors.New(r.Err)
	}
	return res
}

// DecodeResult reads a written Result.
func DecodeResult(data string) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return r, fmt.Errorf("decode an attempt's result: %w", err)
	}
	return r, nil
}

// WorkerLeasePrefix and the node's name make the lease a node's Worker
// runs under.
const WorkerLeasePrefix = "worker:"
