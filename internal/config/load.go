package config

// Stage 2, first half: reading the file, the environment overrides and ${}
// expansion.

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Load reads the configuration file at path; see Parse. A *ValidationError
// it returns has File set to path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	cfg, err := Parse(data, os.LookupEnv)
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		ve.File = path
	}
	return cfg, err
}

// Parse reads a configuration from YAML, taking environment variables from
// env (nil means an empty environment). It expands ${VAR} and
// ${VAR:-default} in every value, applies the overrides TIDEMARK_METADATA,
// TIDEMARK_LISTEN and TIDEMARK_API_TOKEN, fills in defaults and validates
// the result. Its error is a *ValidationError listing every problem.
func Parse(data []byte, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	raw, problems, broken, fatal := decode(data)
	if fatal {
		return nil, &ValidationError{Problems: problems}
	}
	origins, envProblems := applyEnv(&raw, env)
	problems = append(problems, envProblems...)
	b := &builder{env: env}
	cfg := b.config(&raw)
	problems = append(problems, b.problems...)
	for _, p := range b.problems {
		broken = append(broken, p.Path)
	}
	if err := cfg.Validate(); err != nil {
		for _, p := range err.(*ValidationError).Problems {
			// Tasks that did not decode may be there: then noWork is noise.
			if !related(p.Path, broken) && (p != noWork || !related("tasks", broken)) {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) == 0 {
		return cfg, nil
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		ak, ae := rank(a.Path)
		bk, be := rank(b.Path)
		return cmp.Or(cmp.Compare(ak, bk), cmp.Compare(ae, be))
	})
	for i, p := range problems {
		// The longest key wins: api.tokens[N].role over api.tokens[N].
		longest := ""
		for path, name := range origins {
			if (p.Path == path || strings.HasPrefix(p.Path, path+".")) && len(path) > len(longest) {
				longest, problems[i].Path = path, name
			}
		}
	}
	return nil, &ValidationError{Problems: problems}
}

// rank orders problems as the file is laid out: whole-file and line
// problems first, then each top-level key in turn, a list's own problems
// before those of its elements and the elements in order.
func rank(path string) (key, element int) {
	for i, top := range topKeys {
		rest, ok := strings.CutPrefix(path, top)
		if !ok || rest != "" && rest[0] != '.' && rest[0] != '[' {
			continue
		}
		element = -1
		_, _ = fmt.Sscanf(rest, "[%d]", &element)
		return i + 1, element
	}
	return 0, -1
}

var topKeys = []string{"metadata", "api", "log", "cluster", "streams", "batch", "resource_groups", "connections", "tasks"}

// related reports whether path is one of the broken paths ("" stands for
// all), inside one, or contains one.
func related(path string, broken []string) bool {
	within := func(inner, outer string) bool {
		return strings.HasPrefix(inner, outer+".") || strings.HasPrefix(inner, outer+"[")
	}
	for _, b := range broken {
		if b == "" || b == path || within(path, b) || within(b, path) {
			return true
		}
	}
	return false
}

// applyEnv applies the environment overrides; an empty variable counts as
// unset. It returns the key paths it set with the variable that set them,
// and the problems of variables that cannot apply.
func applyEnv(raw *rawConfig, env func(string) (string, bool)) (origins map[string]string, problems []Problem) {
	origins = map[string]string{}
	lookup := func(name string) (scalar, bool) {
		v, ok := env(name)
		return scalar{Value: v, Set: true, Env: name}, ok && v != ""
	}
	if s, ok := lookup(EnvMetadata); ok {
		raw.Metadata = s
		origins["metadata"] = EnvMetadata
	}
	if s, ok := lookup(EnvNode); ok {
		if raw.Cluster == nil {
			raw.Cluster = &rawCluster{}
		}
		raw.Cluster.Node = s
		origins["cluster.node"] = EnvNode
	}
	if s, ok := lookup(EnvListen); ok {
		raw.API.Listen = s
		origins["api.listen"] = EnvListen
	}
	role, roleSet := lookup(EnvAPITokenRole)
	if s, ok := lookup(EnvAPIToken); ok {
		p := fmt.Sprintf("api.tokens[%d]", len(raw.API.Tokens))
		origins[p] = EnvAPIToken
		if roleSet {
			origins[p+".role"] = EnvAPITokenRole
		} else {
			role = scalar{Value: string(DefaultEnvTokenRole), Set: true, Env: EnvAPIToken}
		}
		raw.API.Tokens = append(raw.API.Tokens, rawToken{
			Name:  scalar{Value: EnvTokenName, Set: true, Env: EnvAPIToken},
			Token: s,
			Role:  role,
		})
	} else if roleSet {
		problems = append(problems, Problem{EnvAPITokenRole, "set without " + EnvAPIToken + ": set the token too, or unset " + EnvAPITokenRole})
	}
	return origins, problems
}

// expand replaces ${NAME} and ${NAME:-default} in s with the variable's
// value; the default applies when the variable is unset or empty. "$${" is
// a literal "${"; any other "$" is literal. It returns one message per bad
// reference; the messages never repeat s, which may be a secret.
func expand(s string, env func(string) (string, bool)) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var problems []string
	for i := 0; i < len(s); {
		rest := s[i:]
		if strings.HasPrefix(rest, "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(rest, "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			problems = append(problems, "unterminated ${: close it with }, or write $${ for a literal ${")
			break
		}
		name, def, hasDef := strings.Cut(rest[2:end], ":-")
		i += end + 1
		v, ok := env(name)
		switch {
		case !validVarName(name):
			problems = append(problems, "malformed ${} reference: write ${NAME} or ${NAME:-default}, "+
				"NAME being letters, digits and underscores, or $${ for a literal ${")
		case hasDef && (!ok || v == ""):
			b.WriteString(def)
		case ok:
			b.WriteString(v)
		default:
			problems = append(problems, fmt.Sprintf(
				"environment variable %s is not set: set it, or give a default with ${%s:-default}", name, name))
		}
	}
	return b.String(), problems
}

func validVarName(s string) bool {
	for i, c := range []byte(s) {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}
