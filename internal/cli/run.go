package cli

import (
	"context"
	"log/slog"
	"os"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/daemon"
	"github.com/tidemark/tidemark/internal/stream"
)

func runCmd(g *globals) *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: every configured stream and the HTTP API",
		Long: `Run the daemon: every configured stream and the HTTP API.

The first SIGINT or SIGTERM drains (streams stop at a committed position);
a second one exits at once.

One daemon runs per metadata store: run claims the store first and refuses
to start (exit code 1), naming the running daemon's host, pid and start
time, when another holds it. A killed daemon's claim ends with its process.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			log := newLogger(cfg.Log, g.stderr)
			d, err := daemon.New(c.Context(), cfg, log, stream.Options{}, daemon.ClaimStore())
			if err != nil {
				return err
			}
			// The daemon ends after it logged the signal and freed the
			// second one, not the moment the signal cancels the command.
			ctx, cancel := context.WithCancel(context.WithoutCancel(c.Context()))
			defer cancel()
			go func() {
				<-c.Context().Done()
				log.Info("stopping: draining streams (signal again to exit at once)")
				g.stopSignals() // a second signal now ends the process
				cancel()
			}()
			return d.Run(ctx)
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "tidemark.yaml", "configuration file")
	return c
}

// newLogger logs JSON when stderr is not a terminal, text otherwise.
func newLogger(l config.Log, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.SlogLevel()}
	asJSON := l.Format == config.FormatJSON
	if l.Format == config.FormatAuto || l.Format == "" {
		f, ok := w.(*os.File)
		asJSON = !ok || !isatty.IsTerminal(f.Fd())
	}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
