package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// walk calls f for c and every command below it.
func walk(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		walk(sub, f)
	}
}

// Every command has an Examples section, only the client verbs show the
// client flags, and a group's summary names each of its verbs.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	root := newRoot(&globals{})
	n := 0
	walk(root, func(c *cobra.Command) {
		n++
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Example: add one to examples (examples.go) or set its Example", c.CommandPath())
		}
		for _, line := range strings.Split(c.Example, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "tidemark ") && !strings.Contains(line, " tidemark ") {
				t.Errorf("%s: example line %q does not run tidemark", c.CommandPath(), line)
			}
		}
		has := func(name string) bool {
			return c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil || c.InheritedFlags().Lookup(name) != nil
		}
		client := has("addr")
		switch name := strings.Fields(c.CommandPath() + " x")[1]; name {
		case "run", "doctor", "demo", "version", "x":
			if client || has("token") {
				t.Errorf("%s shows the client flags --addr and --token", c.CommandPath())
			}
		default:
			if !client {
				t.Errorf("%s lacks --addr", c.CommandPath())
			}
		}
	})
	if n < 30 {
		t.Errorf("walked %d commands", n)
	}
	for _, group := range []string{"backfill", "stream"} {
		c, _, err := root.Find([]string{group})
		if err != nil {
			t.Fatal(err)
		}
		summary := strings.ToLower(c.Short + " " + c.Long)
		for _, sub := range c.Commands() {
			if !strings.Contains(summary, sub.Name()) {
				t.Errorf("the summary of %s (%q) does not name %s", group, summary, sub.Name())
			}
		}
	}
}

// Every example names a command and flags that exist.
func TestExamplesParse(t *testing.T) {
	t.Parallel()
	walk(newRoot(&globals{}), func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			line, _, _ = strings.Cut(line, ">")
			fields := strings.Fields(line)
			if len(fields) == 0 || fields[0] != "tidemark" || strings.ContainsAny(line, `"'$`) {
				continue // shell around it: not parsed here
			}
			root := newRoot(&globals{})
			found, args, err := root.Find(fields[1:])
			if err == nil {
				found.InitDefaultHelpFlag()
				found.InitDefaultVersionFlag()
				err = found.ParseFlags(args)
			}
			if err == nil && found.Args != nil {
				err = found.Args(found, found.Flags().Args())
			}
			if err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), strings.TrimSpace(line), err)
			}
		}
	})
}

// TestBatchFlagGroups: batch backfill's and batch preview's help list their
// flags under Dates, Scope, Concurrency groups and Policies, then the
// others, each flag once.
func TestBatchFlagGroups(t *testing.T) {
	t.Parallel()
	root := newRoot(&globals{})
	for _, verb := range []string{"backfill", "preview"} {
		c, _, err := root.Find([]string{"batch", verb})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		c.SetOut(&out)
		if err := c.Usage(); err != nil {
			t.Fatal(err)
		}
		help := out.String()
		last := -1
		for _, heading := range []string{"\nDates:\n", "\nScope (which tasks):\n", "\nConcurrency groups:\n", "\nPolicies:\n", "\nOther flags:\n", "\nGlobal Flags:\n"} {
			i := strings.Index(help, heading)
			if i <= last {
				t.Errorf("batch %s help: %q missing or out of order in\n%s", verb, strings.TrimSpace(heading), help)
			}
			last = i
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Deprecated != "" { // --run-at: kept working, not shown
				return
			}
			listed := regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(f.Name) + `[ =]`)
			if n := len(listed.FindAllString(help, -1)); n != 1 {
				t.Errorf("batch %s help lists --%s %d times", verb, f.Name, n)
			}
		})
		if !strings.Contains(help[strings.Index(help, "\nDates:\n"):strings.Index(help, "\nScope (which tasks):\n")], "--from") {
			t.Errorf("batch %s help: --from is not under Dates", verb)
		}
	}
}
