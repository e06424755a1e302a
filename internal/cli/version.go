package cli

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version and commit are set at build time with
//
//	-ldflags "-X github.com/tidemark/tidemark/internal/cli.version=v1.2.0 -X github.com/tidemark/tidemark/internal/cli.commit=abc123"
//
// and otherwise taken from the build information Go records (the module's
// version, the VCS revision of a build inside a checkout).
var version, commit string

// Version is what `tidemark version` prints.
type Version struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// CommitTime is the commit's time (RFC 3339), empty when unknown.
	CommitTime string `json:"commit_time,omitempty"`
	// Modified says the build's tree had changes not committed.
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

// buildVersion is this binary's version: -ldflags' values first, then the
// build information's.
func buildVersion() Version {
	v := Version{Version: version, Commit: commit, Go: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		v.Version, v.Commit = cmp.Or(v.Version, "unknown"), cmp.Or(v.Commit, "unknown")
		return v
	}
	if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if commit == "" {
				v.Commit = s.Value
			}
		case "vcs.time":
			if commit == "" {
				v.CommitTime = s.Value
			}
		case "vcs.modified":
			v.Modified = commit == "" && s.Value == "true"
		}
	}
	v.Version, v.Commit = cmp.Or(v.Version, "devel"), cmp.Or(v.Commit, "unknown")
	return v
}

// text is the version as lines for a person.
func (v Version) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tidemark %s\ncommit %s", v.Version, v.Commit)
	var notes []string
	if v.CommitTime != "" {
		notes = append(notes, v.CommitTime)
	}
	if v.Modified {
		notes = append(notes, "with uncommitted changes")
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
	}
	fmt.Fprintf(&b, "\n%s\n", v.Go)
	return b.String()
}

// versionTemplate is a cobra version template printing text as it is.
func versionTemplate(text string) string {
	return "{{`" + strings.ReplaceAll(text, "`", "`}}{{\"`\"}}{{`") + "`}}"
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tidemark's version, commit and Go version (also tidemark --version)",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			v := buildVersion()
			if g.json {
				return g.printJSON(v)
			}
			_, err := fmt.Fprint(g.stdout, v.text())
			return err
		},
	}
}
