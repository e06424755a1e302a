package logkey_test

import (
	"errors"
	"log/slog"
	"os"

	"github.com/tidemark/tidemark/internal/logkey"
)

func Example() {
	// A handler without the time, so that the output is the same each run.
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	log = log.With(logkey.Stream("shop"))
	log.Info("backfill started", logkey.Backfill(7), logkey.Object("public.orders"))
	log.Warn("instance failed", logkey.BatchBackfill(7), logkey.Instance(123), logkey.Task("sales.daily"),
		logkey.Err(errors.New("exit status 1")))
	// Output:
	// level=INFO msg="backfill started" stream=shop backfill_id=7 object=public.orders
	// level=WARN msg="instance failed" stream=shop batch_backfill_id=7 instance_id=123 task=sales.daily err="exit status 1"
}
