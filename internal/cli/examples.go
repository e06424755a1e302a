package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Examples sections of the commands, by command path
// (without "tidemark "), for those that do not set their own Example.
var examples = map[string][]string{
	"": {
		"tidemark run -c tidemark.yaml                 # the daemon",
		"tidemark streams -c tidemark.yaml             # a client verb, told where the daemon is by its configuration",
		"tidemark backfill initiate shop public.orders --wait",
	},
	"run":     {"tidemark run -c /etc/tidemark/tidemark.yaml", "TIDEMARK_LISTEN=127.0.0.1:7500 tidemark run -c tidemark.yaml"},
	"demo":    {"tidemark demo", "tidemark demo --keep   # keep the demo's files to look at afterwards"},
	"doctor":  {"tidemark doctor -c tidemark.yaml", "tidemark doctor -c tidemark.yaml --json"},
	"version": {"tidemark version", "tidemark --version", "tidemark version --json"},
	"streams": {"tidemark streams", "tidemark streams --addr db-host:7420 --token \"$TOKEN\"", "tidemark streams -c tidemark.yaml --json"},
	"objects": {"tidemark objects shop", "tidemark objects shop --json"},
	"backfill": {
		"tidemark backfill estimate shop public.orders",
		"tidemark backfill initiate shop public.orders --wait",
		"tidemark backfill list --stream shop --status active",
	},
	"backfill initiate": {
		"tidemark backfill initiate shop public.orders public.customers",
		"tidemark backfill initiate shop public.orders --wait",
		"tidemark backfill initiate shop public.orders --sample 1000",
		"tidemark backfill initiate shop public.orders --at 2026-12-01T02:00:00+01:00 --rows-per-second 5000",
		"tidemark backfill initiate shop public.orders --filter \"region = 'eu'\"",
		"tidemark backfill initiate shop public.orders public.customers --as-one-run",
	},
	"backfill wait": {
		"tidemark backfill wait shop public.orders",
		"tidemark backfill wait shop public.orders public.customers --reconnect 5m",
	},
	"backfill stop":     {"tidemark backfill stop shop public.orders", "tidemark backfill stop shop public.orders public.customers"},
	"backfill estimate": {"tidemark backfill estimate shop", "tidemark backfill estimate shop public.orders --json"},
	"backfill list": {
		"tidemark backfill list",
		"tidemark backfill list --stream shop --object public.orders",
		"tidemark backfill list --status failed --since 2026-01-01T00:00:00Z --json",
	},
	"lineage":           {"tidemark lineage list --state pending", "tidemark lineage approve 3"},
	"nodes":             {"tidemark nodes", "tidemark nodes --json"},
	"lineage list":      {"tidemark lineage list --state pending"},
	"lineage show":      {"tidemark lineage show 3"},
	"lineage approve":   {"tidemark lineage approve 3"},
	"lineage dismiss":   {"tidemark lineage dismiss 3"},
	"backfill dates":    {"tidemark backfill dates 41", "tidemark backfill dates 41 --json"},
	"backfill set-rate": {"tidemark backfill set-rate 12 20000", "tidemark backfill set-rate 12 0   # back to the stream's backfill.rows_per_second"},
	"backfill show-run": {"tidemark backfill show-run 3", "tidemark backfill show-run 3 --json"},
	"backfill run":      {"tidemark backfill show-run 3   # run is show-run's deprecated name"},
	"backfill stop-run": {"tidemark backfill stop-run 3"},
	"verify":            {"tidemark verify shop", "tidemark verify shop public.orders --chunk-size 5000", "tidemark verify shop public.orders --repair"},
	"stream":            {"tidemark stream pause shop", "tidemark stream resume shop", "tidemark stream reset shop"},
	"stream pause":      {"tidemark stream pause shop"},
	"stream resume":     {"tidemark stream resume shop"},
	"stream reset":      {"tidemark stream reset shop   # after the replication slot was lost: re-create it, backfill every object"},
	"tasks":             {"tidemark tasks", "tidemark tasks --json"},
	"audit": {
		"tidemark audit",
		"tidemark audit --stream shop --object public.orders",
		"tidemark audit --since 2026-01-01T00:00:00Z --format csv > audit.csv",
	},
	"batch": {
		"tidemark batch preview sales.orders_daily --from 2025-01-01 --to 2025-01-31 --downstream all --groups 4",
		"tidemark batch backfill sales.orders_daily --from 2025-01-01 --to 2025-01-31 --downstream all --groups 4 --wait",
		"tidemark batch list",
	},
	"batch preview":        {"tidemark batch preview sales.orders_daily --from 2025-01-01 --to 2025-01-31", "tidemark batch preview sales.orders_daily --from 2025-01-01 --to 2025-01-31 --downstream all --groups 4 --tz Europe/Paris"},
	"batch backfill":       {"tidemark batch backfill sales.orders_daily --from 2025-01-01 --to 2025-01-31 --wait", "tidemark batch backfill sales.orders_daily --from 2025-01-01 --to 2025-01-31 --downstream all --groups 4 --name january"},
	"batch list":           {"tidemark batch list", "tidemark batch list --json"},
	"batch show":           {"tidemark batch show 7", "tidemark batch show 7 --json"},
	"batch instances":      {"tidemark batch instances 7", "tidemark batch instances 7 --state failed"},
	"batch log":            {"tidemark batch log 123", "tidemark batch log 123 --attempt 1", "tidemark batch log 123 --code   # the rendered command or SQL"},
	"batch export":         {"tidemark batch export 7 > nodes.csv"},
	"batch stop":           {"tidemark batch stop 7"},
	"batch rerun":          {"tidemark batch rerun 7   # every failed and stopped instance", "tidemark batch rerun 7 123 124"},
	"batch stop-instance":  {"tidemark batch stop-instance 123"},
	"batch mark-succeeded": {"tidemark batch mark-succeeded 123"},
	"batch rerun-instance": {"tidemark batch rerun-instance 123"},
}

// addExamples sets the Example of every command of the tree under c that
// has none, from examples.
func addExamples(c *cobra.Command) {
	if ex, ok := examples[strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "tidemark"), " ")]; ok && c.Example == "" {
		c.Example = "  " + strings.Join(ex, "\n  ")
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
