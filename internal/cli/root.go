// Package cli is tidemark's command line: the daemon (run), the client
// verbs that talk to its API, and the demo.
//
// Exit codes (exitCodesHelp): 0 success; 1 an error; 2 bad usage (flags,
// arguments, a stream, object or id that does not exist); 3 verify found
// differences; 4 the API refused the action in the current state (for
// example initiating a backfill that is already active).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// exitCodesHelp is the exit code table, as --help shows it.
const exitCodesHelp = `Exit codes:
  0  success
  1  an error: the daemon is unreachable, a stream failed, a backfill
     followed with --wait failed or was stopped, a check failed (doctor)
  2  bad usage: a flag, an argument, a stream, object or id that does not
     exist (the message names the closest existing ones), or a request the
     API refuses as invalid
  3  verify found differences
  4  the action was refused in the current state (for example initiating a
     backfill of an object whose backfill is already pending or active)`

// Exit codes.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2
	ExitMismatch = 3
	ExitRefused  = 4
)

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

type globals struct {
	// addr and token are the client verbs' flags, then (resolveClient)
	// the API's base URL and the token to send; clientConfig is their -c.
	addr         string
	token        string
	clientConfig string
	json         bool
	// reconnect is how long following tries to reach a daemon that
	// stopped answering (--reconnect).
	reconnect time.Duration
	// stdout filters what it prints through safeText; raw is the same
	// output unfiltered, for JSON, CSV and the progress display.
	stdout io.Writer
	raw    io.Writer
	stderr io.Writer
	// stopSignals releases SIGINT/SIGTERM so a second one ends the process.
	stopSignals func()
}

// Execute runs the command line and returns the exit code.
func Execute(ctx context.Context, stopSignals func(), args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: textWriter{stdout}, raw: stdout, stderr: stderr, stopSignals: stopSignals}
	root := newRoot(g)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "tidemark:", safeText(err.Error()))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitError
}

// newRoot is the command tree.
func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "tidemark",
		Short: "Backfill engine: stream PostgreSQL changes into a destination and backfill any table while the stream flows",
		Long: `Backfill engine: stream PostgreSQL changes into a destination and backfill
any table while the stream flows. See README.md and docs/.

` + clientHelp + `

` + exitCodesHelp,
		Version:       buildVersion().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return g.resolveClient(c)
		},
	}
	root.SetVersionTemplate(versionTemplate(buildVersion().text()))
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON instead of tables")
	root.AddCommand(runCmd(g), demoCmd(g), doctorCmd(g), versionCmd(g))
	for _, c := range []*cobra.Command{streamsCmd(g), objectsCmd(g), backfillCmd(g), verifyCmd(g), streamCmd(g), tasksCmd(g), batchCmd(g), lineageCmd(g), auditCmd(g), nodesCmd(g)} {
		root.AddCommand(g.addClientFlags(c))
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: ExitUsage, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	addExamples(root)
	return root
}

// usageArgs checks positional arguments with the usage exit code.
func usageArgs(min int, max int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return &exitError{code: ExitUsage, err: fmt.Errorf("%s: wrong number of arguments (usage: %s)", c.CommandPath(), c.UseLine())}
		}
		return nil
	}
}
