package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagGroup is a heading and the flags shown under it in a command's help.
type flagGroup struct {
	title string
	flags []string
}

// requestFlagGroups order batch backfill's many flags by what they decide.
var requestFlagGroups = []flagGroup{
	{"Dates", []string{"from", "to", "dates", "weekdays", "month-days", "time-range", "hourly-scope", "order"}},
	{"Scope (which tasks)", []string{"upstream", "downstream", "coverage", "values", "exclude-task", "exclude-output", "keep-paused", "dry-run-task"}},
	{"Concurrency groups", []string{"groups", "single-instance", "resource-group"}},
	{"Policies", []string{"succeeded", "running", "paused", "dry-run-policy", "stop-on-failure", "wait-scheduled", "start-at", "confirm"}},
}

// flagGroupKey is the flag annotation that names a flag's group.
const flagGroupKey = "tidemark_flag_group"

// localFlagsSection is the part of cobra's usage template that lists a
// command's own flags, which grouped commands replace.
const localFlagsSection = "Flags:\n{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}"

func init() { cobra.AddTemplateFunc("groupedFlagUsages", groupedFlagUsages) }

// groupFlags shows c's flags under the groups' headings in its help, the
// flags of no group last under "Other flags". It panics on a flag c does not
// have, or on a usage template without the flags section: both are
// programming errors a help test finds.
func groupFlags(c *cobra.Command, groups []flagGroup) {
	titles := make([]string, len(groups))
	for i, g := range groups {
		titles[i] = g.title
		for _, name := range g.flags {
			if err := c.Flags().SetAnnotation(name, flagGroupKey, []string{g.title}); err != nil {
				panic("group flags of " + c.Name() + ": " + err.Error())
			}
		}
	}
	tmpl := c.UsageTemplate()
	if !strings.Contains(tmpl, localFlagsSection) {
		panic("group flags of " + c.Name() + ": the usage template has no flags section")
	}
	c.SetUsageTemplate(strings.Replace(tmpl, localFlagsSection,
		`{{groupedFlagUsages .}}`, 1))
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[flagGroupKey] = strings.Join(titles, "\x00")
}

// groupedFlagUsages renders c's own flags group by group.
func groupedFlagUsages(c *cobra.Command) string {
	titles := strings.Split(c.Annotations[flagGroupKey], "\x00")
	sets := map[string]*pflag.FlagSet{}
	other := pflag.NewFlagSet("other", pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		g := f.Annotations[flagGroupKey]
		if len(g) == 0 {
			other.AddFlag(f)
			return
		}
		if sets[g[0]] == nil {
			sets[g[0]] = pflag.NewFlagSet(g[0], pflag.ContinueOnError)
		}
		sets[g[0]].AddFlag(f)
	})
	var b strings.Builder
	for _, t := range titles {
		if fs := sets[t]; fs != nil {
			b.WriteString(t + ":\n" + strings.TrimRight(fs.FlagUsages(), " \n") + "\n\n")
		}
	}
	b.WriteString("Other flags:\n" + strings.TrimRight(other.FlagUsages(), " \n"))
	return b.String()
}
