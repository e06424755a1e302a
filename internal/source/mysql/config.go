package mysql

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Config is what the MySQL source needs to connect.
type Config struct {
	// DSN is a URL: mysql://user:password@host:port/database. The port
	// defaults to 3306; the database is the one whose tables are read and
	// streamed (required). Only the URL form is accepted, the same shape
	// as the PostgreSQL source's DSN; a go-sql-driver DSN
	// (user:pass@tcp(host:3306)/db) is refused with the URL to write.
	DSN string
	// ServerID identifies the stream to the server as a replica: it must
	// differ from the server's own server_id and from every other replica
	// and binlog reader of that server.
	ServerID uint32
	// Heartbeat is how often an idle server sends a heartbeat, on which
	// Stream reports progress; 0 means 5 s.
	Heartbeat time.Duration
	// Logger receives the binlog reader's own messages (reconnects,
	// rotations); nil discards them.
	Logger *slog.Logger
}

// dsn is a parsed Config.DSN.
type dsn struct {
	User, Password string
	Host           string // host:port
	Database       string
}

// parseDSN reads mysql://user:password@host:port/database.
func parseDSN(s string) (dsn, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		return dsn{}, fmt.Errorf("source dsn: want a URL like mysql://user:password@host:3306/database (go-sql-driver's user:pass@tcp(host)/db form is not accepted)")
	}
	var d dsn
	if u.User != nil {
		d.User = u.User.Username()
		d.Password, _ = u.User.Password()
	}
	if d.User == "" {
		return dsn{}, errors.New("source dsn: name the user, like mysql://user:password@host:3306/database")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "3306"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return dsn{}, fmt.Errorf("source dsn: port %q is not a TCP port", port)
	}
	d.Host = net.JoinHostPort(host, port)
	if len(u.Path) < 2 {
		return dsn{}, errors.New("source dsn: name the database whose tables to read, like mysql://user:password@host:3306/database")
	}
	d.Database, err = url.PathUnescape(u.Path[1:])
	if err != nil {
		return dsn{}, fmt.Errorf("source dsn: database name: %w", err)
	}
	if len(u.Query()) > 0 {
		return dsn{}, fmt.Errorf("source dsn: unknown parameters %q: the MySQL source takes none", u.RawQuery)
	}
	return d, nil
}

// Redacted is the DSN with its password replaced, for messages.
func (d dsn) String() string {
	u := url.URL{Scheme: "mysql", User: url.UserPassword(d.User, "xxxxx"), Host: d.Host, Path: "/" + d.Database}
	return u.String()
}
