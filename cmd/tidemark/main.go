// Command tidemark is a backfill engine: it streams changes from
// PostgreSQL into a destination and backfills any table while the stream
// keeps flowing. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tidemark/tidemark/internal/batch/runner"
	"github.com/tidemark/tidemark/internal/cli"
	_ "github.com/tidemark/tidemark/internal/sink/all"   // every destination type
	_ "github.com/tidemark/tidemark/internal/source/all" // every source type
)

func main() {
	// Started as a shell task's watchdog, it is one (docs/cluster.md).
	runner.ServeWatchdog()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, stop, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}
