// Package cli is tidemark's command line: the daemon (run), the client
// verbs that talk to its API, and the demo.
//
// Exit codes: 0 success; 1 an error; 2 bad usage (flags, arguments);
// 3 verify found differences; 4 the API refused the action (for example
// initiating a backfill that is already active).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

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
	addr  string
	token string
	json  bool
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
	root := &cobra.Command{
		Use:           "tidemark",
		Short:         "Backfill engine: stream PostgreSQL changes into a destination and backfill any table while the stream flows",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.PersistentFlags().StringVar(&g.addr, "addr", envOr("TIDEMARK_ADDR", "http://127.0.0.1:7420"), "address of the tidemark API (env TIDEMARK_ADDR)")
	root.PersistentFlags().StringVar(&g.token, "token", os.Getenv("TIDEMARK_TOKEN"), "API token (env TIDEMARK_TOKEN)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON instead of tables")
	root.AddCommand(runCmd(g), streamsCmd(g), objectsCmd(g), backfillCmd(g), verifyCmd(g), streamCmd(g), demoCmd(g),
		tasksCmd(g), batchCmd(g))
	root.AddCommand(doctorCmd(g), auditCmd(g))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: ExitUsage, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
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

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
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
