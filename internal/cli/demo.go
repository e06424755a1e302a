package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/daemon"
	"github.com/tidemark/tidemark/internal/pgserver"
	"github.com/tidemark/tidemark/internal/stream"
)

func demoCmd(g *globals) *cobra.Command {
	var rows int
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the main job end to end on a throwaway PostgreSQL: stream into SQLite, backfill, verify",
		Long: `Start a throwaway PostgreSQL server (the machine's PostgreSQL binaries, run as
the postgres user) with sample tables, stream them into a SQLite file while a
writer keeps changing them, backfill every table, print the objects' statuses
and a verify result, and stop the server.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			return runDemo(c.Context(), g, rows, keep)
		},
	}
	c.Flags().IntVar(&rows, "rows", 50000, "rows in the sample orders table")
	c.Flags().BoolVar(&keep, "keep", false, "keep the demo's files (the SQLite destination and the metadata store) after it ends")
	return c
}

func runDemo(ctx context.Context, g *globals, rows int, keep bool) error {
	if rows < 1 || rows > 10_000_000 {
		return &exitError{code: ExitUsage, err: fmt.Errorf("--rows %d: use 1 to 10000000", rows)}
	}
	say := func(format string, args ...any) { fmt.Fprintf(g.stdout, "==> "+format+"\n", args...) }
	pgserver.ScrubEnv()
	say("starting a throwaway PostgreSQL server")
	srv, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	dsn, err := srv.CreateDatabase(ctx, "shop")
	if err != nil {
		return err
	}
	say("creating sample tables in %s (orders: %d rows)", "shop", rows)
	if err := seedDemo(ctx, dsn, rows); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tidemark-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	say("%s", demoFilesLine(dir, keep))
	dest := filepath.Join(dir, "replica.db")
	cfg, err := demoConfig(dir, dsn, dest)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := daemon.New(ctx, cfg, log, stream.Options{})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-d.Ready:
	case err := <-done:
		return err
	}
	say("tidemark runs (API on http://%s); streaming into %s with automatic backfill", d.Addr, dest)
	writerCtx, stopWriter := context.WithCancel(ctx)
	writes := make(chan int, 1)
	go func() { writes <- demoWriter(writerCtx, dsn) }()
	if err := waitLoaded(ctx, d, "shop"); err != nil {
		stopWriter()
		return err
	}
	stopWriter()
	say("backfills completed while a writer made %d changes; objects:", <-writes)
	return reportDemo(ctx, &globals{addr: "http://" + d.Addr, stdout: g.stdout, raw: g.raw, stderr: g.stderr}, say)
}

// demoFilesLine says where the demo's files are and what becomes of them.
func demoFilesLine(dir string, keep bool) string {
	if keep {
		return fmt.Sprintf("files in %s (replica.db: the destination, meta.db: tidemark's metadata); --keep keeps them after the demo", dir)
	}
	return fmt.Sprintf("files in %s (replica.db: the destination, meta.db: tidemark's metadata); removed when the demo ends (run with --keep to keep them)", dir)
}

func demoConfig(dir, dsn, dest string) (*config.Config, error) {
	return config.Parse([]byte(fmt.Sprintf(`
metadata: sqlite://%s
api: {listen: "127.0.0.1:0"}
log: {level: warn}
streams:
  - name: shop
    source: {type: postgres, dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["public.*"]
    backfill: {mode: automatic, chunk_size: 5000, max_concurrent: 2}
`, filepath.Join(dir, "meta.db"), dsn, dest)), func(string) (string, bool) { return "", false })
}

// reportDemo prints the objects, the backfill runs and a verify result
// through the API, as a user would see them.
func reportDemo(ctx context.Context, sub *globals, say func(string, ...any)) error {
	objs := objectsCmd(sub)
	objs.SetContext(ctx)
	if err := objs.RunE(objs, []string{"shop"}); err != nil {
		return err
	}
	say("backfill runs (CONFLICTS: rows the writer changed while their chunk was read; the stream's newer values won, none was lost):")
	lst := backfillListCmd(sub)
	lst.SetContext(ctx)
	if err := lst.RunE(lst, nil); err != nil {
		return err
	}
	say("verify (source against destination, per key range):")
	var checks []api.CheckView
	if err := sub.client().do(ctx, "POST", "/api/v1/streams/shop/verify", api.VerifyRequest{}, &checks); err != nil {
		return err
	}
	printChecks(sub, checks)
	for _, o := range checks {
		if !o.Match {
			return &exitError{code: ExitMismatch, err: fmt.Errorf("verify found differences in %s", o.Object)}
		}
	}
	say("done: the destination equals the source")
	return nil
}

// waitLoaded waits until every object's backfill is completed and loaded.
func waitLoaded(ctx context.Context, d *daemon.Daemon, streamName string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		objs, err := d.Store().ListObjects(ctx, streamName)
		if err != nil {
			return err
		}
		done := len(objs) > 0
		for _, o := range objs {
			if o.Status == stream.StatusFailed {
				return fmt.Errorf("backfill of %s.%s failed: %s", o.Schema, o.Table, o.Reason)
			}
			done = done && o.Status == stream.StatusCompleted && o.Loaded
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("backfills did not finish within 10 minutes")
}

func seedDemo(ctx context.Context, dsn string, rows int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf(`
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text, created_at timestamptz DEFAULT now());
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com', now() - g * interval '1 hour' FROM generate_series(1, 2000) g;
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, amount numeric(12,2), note text,
  payload jsonb, created_at timestamptz DEFAULT now(), updated_at timestamptz);
INSERT INTO orders SELECT g, 1 + g %% 2000, (ARRAY['new','paid','shipped'])[1 + g %% 3], (g %% 10000) / 100.0,
  'order ' || g, jsonb_build_object('items', g %% 7, 'gift', g %% 5 = 0), now() - g * interval '1 minute', NULL
FROM generate_series(1, %d) g;
CREATE TABLE order_lines (order_id bigint, line int, sku text, qty int, PRIMARY KEY (order_id, line));
INSERT INTO order_lines SELECT g / 3 + 1, g %% 3, 'SKU-' || (g %% 97), 1 + g %% 4 FROM generate_series(0, 8999) g;`, rows))
	return err
}

// demoWriter keeps changing the sample tables until ctx ends and returns
// how many statements it ran.
func demoWriter(ctx context.Context, dsn string) int {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0
	}
	defer conn.Close(context.WithoutCancel(ctx))
	n := 0
	for i := 1; ctx.Err() == nil; i++ {
		var err error
		switch i % 3 {
		case 0:
			_, err = conn.Exec(ctx, "UPDATE orders SET status = 'shipped', updated_at = now() WHERE id = $1", (i*7919)%40000+1)
		case 1:
			_, err = conn.Exec(ctx, "INSERT INTO orders (id, customer_id, status, amount) VALUES ($1, 1, 'new', 9.99) ON CONFLICT DO NOTHING", 10_000_000+i)
		case 2:
			_, err = conn.Exec(ctx, "DELETE FROM order_lines WHERE order_id = $1", i%3000+1)
		}
		if err == nil {
			n++
		}
	}
	return n
}
