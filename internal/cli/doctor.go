package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor"
)

func doctorCmd(g *globals) *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration's prerequisites: sources, slots, privileges, destinations, disk, clocks",
		Long: `Check what the configuration needs, before or while the daemon runs: each
stream's source (reachable, wal_level, privileges, publication, replication
slot, row keys, clock), its destination, the metadata store, free disk space
and the connections of recurring tasks. It talks to the databases directly,
not to the daemon's API. Each check prints OK, WARN or FAIL with what it
found and, for WARN and FAIL, how to fix it. See docs/doctor.md.

Exits 0 when no check fails (warnings allowed), 1 when one fails, 2 when the
configuration itself is invalid.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			checks := doctor.Run(c.Context(), cfg)
			if g.json {
				if checks == nil {
					checks = []doctor.Check{}
				}
				if err := g.printJSON(checks); err != nil {
					return err
				}
			} else {
				printDoctor(g, checks)
			}
			if n := doctor.Failed(checks); n > 0 {
				return &exitError{code: ExitError, err: fmt.Errorf("%d %s failed", n, pluralWord(n, "check", "checks"))}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&path, "config", "c", "tidemark.yaml", "configuration file")
	return c
}

// printDoctor prints one line per check, its fix indented below it, and a
// summary.
func printDoctor(g *globals, checks []doctor.Check) {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	width = min(width, 40)
	counts := map[doctor.Status]int{}
	for _, c := range checks {
		counts[c.Status]++
		fmt.Fprintf(g.stdout, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		for i, line := range strings.Split(c.Fix, "\n") {
			if c.Fix == "" {
				break
			}
			label := "      fix: "
			if i > 0 {
				label = "           "
			}
			fmt.Fprintln(g.stdout, label+line)
		}
	}
	fmt.Fprintf(g.stdout, "%d OK, %d WARN, %d FAIL\n", counts[doctor.OK], counts[doctor.Warn], counts[doctor.Fail])
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
