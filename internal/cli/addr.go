package cli

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark/tidemark/internal/config"
)

// Environment variables of the client verbs.
const (
	envAddr  = "TIDEMARK_ADDR"
	envToken = "TIDEMARK_TOKEN"
	// defaultAddr is the daemon's default api.listen.
	defaultAddr = "127.0.0.1:7420"
)

// clientHelp is the root command's word on the client verbs' flags,
// which only those verbs show.
const clientHelp = `The client verbs (every command but run, doctor, demo and version) talk to
the daemon's API:
  --addr ADDR     the daemon's address: host:port as api.listen takes it
                  (localhost:7420, 127.0.0.1:7420), or http://… or https://…;
                  env TIDEMARK_ADDR; default 127.0.0.1:7420
  --token TOKEN   the API token; env TIDEMARK_TOKEN
  -c FILE         read both from the daemon's configuration file: api.listen,
                  and the first token of the highest role in api.tokens
An --addr or --token given on the command line wins over -c, and -c wins
over TIDEMARK_ADDR and TIDEMARK_TOKEN.`

// addClientFlags gives c (and its subcommands) the flags that say where
// the daemon is: --addr, --token and -c.
func (g *globals) addClientFlags(c *cobra.Command) *cobra.Command {
	f := c.PersistentFlags()
	f.StringVar(&g.addr, "addr", "", "the daemon's address: host:port as api.listen takes it, or http(s)://host:port (env "+envAddr+"; default "+defaultAddr+")")
	f.StringVar(&g.token, "token", "", "API token (env "+envToken+")")
	f.StringVarP(&g.clientConfig, "config", "c", "", "read --addr (api.listen) and --token (the first token of the highest role) from the daemon's configuration `FILE`")
	return c
}

// resolveClient sets g.addr to the API's base URL and g.token to the token
// for a client verb, from the flags, the configuration file (-c), the
// environment and the default, in that order. Other commands are left
// alone.
func (g *globals) resolveClient(c *cobra.Command) error {
	f := c.Flags()
	if f.Lookup("addr") == nil {
		return nil
	}
	addr, token := g.addr, g.token
	var fileAddr, fileToken string
	if g.clientConfig != "" {
		cfg, err := config.Load(g.clientConfig)
		if err != nil {
			return &exitError{code: ExitUsage, err: fmt.Errorf("-c: %w", err)}
		}
		fileAddr, fileToken = cfg.API.Listen, strongestToken(cfg.API.Tokens)
	}
	if !f.Changed("addr") {
		addr = cmp.Or(fileAddr, os.Getenv(envAddr), defaultAddr)
	}
	if !f.Changed("token") {
		token = cmp.Or(fileToken, os.Getenv(envToken))
	}
	base, err := apiBase(addr)
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	g.addr, g.token = base, token
	return nil
}

// strongestToken is the first token of the highest role, "" when there is
// none.
func strongestToken(tokens []config.Token) string {
	var best *config.Token
	for i, t := range tokens {
		if best == nil || (t.Role.Allows(best.Role) && t.Role != best.Role) {
			best = &tokens[i]
		}
	}
	if best == nil {
		return ""
	}
	return best.Token
}

// apiBase is the base URL of the API at addr: host:port (as api.listen
// takes it; an unspecified host is this machine's loopback), or an http://
// or https:// URL.
func apiBase(addr string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("--addr %q: %s: use host:port (as api.listen takes it, e.g. %s or localhost:7420), http://host:port or https://host:port", addr, why, defaultAddr)
	}
	s := strings.TrimSpace(addr)
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		u, err := url.Parse(s)
		switch {
		case err != nil:
			return "", bad("not a URL")
		case scheme != "http" && scheme != "https":
			return "", bad("the scheme is neither http nor https")
		case u.Host == "" || u.Port() == "" && strings.HasSuffix(u.Host, ":"):
			return "", bad("no host")
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return "", bad("a user, query or fragment has no place in it")
		}
		return strings.TrimSuffix(scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", bad("no port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", bad("the port is not a number from 1 to 65535")
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
