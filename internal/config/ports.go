package config

import (
	"net/url"
	"strconv"
	"strings"
)

// Port numbers a DSN may name; pgx refuses the others.
const (
	minPort = 1
	maxPort = 65535
)

// dsnPorts returns the ports a postgres:// URL names, as written: one per
// host of its host list (an omitted one is left out) and those of a port
// query parameter, in the order pgx reads them. It never returns the URL's
// other parts, which may hold a password.
func dsnPorts(dsn string) []string {
	rest := dsn
	for _, scheme := range []string{"postgresql://", "postgres://", "mysql://"} {
		if r, ok := strings.CutPrefix(dsn, scheme); ok {
			rest = r
			break
		}
	}
	// The user info ends at the first @ before any /.
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		rest = rest[i+1:]
	}
	hosts, query := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hosts = rest[:i]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		query = rest[i+1:]
	}
	var ports []string
	for _, h := range strings.Split(hosts, ",") {
		if strings.HasPrefix(h, "[") { // an IPv6 address
			end := strings.IndexByte(h, ']')
			if end < 0 {
				continue
			}
			h = h[end+1:]
		}
		if _, port, ok := strings.Cut(h, ":"); ok && port != "" {
			ports = append(ports, port)
		}
	}
	for _, pair := range strings.Split(query, "&") {
		if k, v, _ := strings.Cut(pair, "="); k == "port" {
			for _, p := range strings.Split(v, ",") {
				if p != "" {
					ports = append(ports, p)
				}
			}
		}
	}
	return ports
}

// badPort returns the first port of dsn that is not a number from minPort
// to maxPort, as the message shows it, or "".
func badPort(dsn string) string {
	for _, p := range dsnPorts(dsn) {
		if dec, err := url.PathUnescape(p); err == nil {
			p = dec
		}
		if n, err := strconv.Atoi(p); err != nil || n < minPort || n > maxPort {
			return p
		}
	}
	return ""
}
