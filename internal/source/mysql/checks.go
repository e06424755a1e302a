package mysql

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// Problem is one unmet prerequisite and its exact fix.
type Problem struct {
	Check string // what was checked, e.g. "binlog_row_image"
	Found string // what the server has
	Fix   string // the SQL or my.cnf line(s) that fix it
}

func (p Problem) String() string { return p.Check + ": " + p.Found + "; fix: " + p.Fix }

// Prerequisites is what Check found.
type Prerequisites struct {
	Version string // the server's version string
	MariaDB bool
	// Retention is how long the server keeps binlogs before purging them
	// (expire_logs_days or binlog_expire_logs_seconds); 0 when it never
	// purges them by age.
	Retention time.Duration
	// Problems lists every unmet prerequisite at once.
	Problems []Problem
}

// RetentionText describes the binlog retention for a person.
func (p Prerequisites) RetentionText() string {
	if p.Retention == 0 {
		return "binlogs are not purged by age (expire_logs_days and binlog_expire_logs_seconds are 0)"
	}
	return "binlogs are purged after " + p.Retention.String() + ": a stream stopped longer than that must be reset"
}

// Check reads the server's binlog settings and the account's grants and
// returns every unmet prerequisite, each with its fix.
func (s *Source) Check(ctx context.Context) (Prerequisites, error) {
	var p Prerequisites
	err := s.with(ctx, func(c *client.Conn) error {
		vars, err := variables(c)
		if err != nil {
			return err
		}
		p.Version = vars["version"]
		p.MariaDB = strings.Contains(strings.ToLower(p.Version), "mariadb")
		p.Retention = retention(vars)
		p.Problems = settingProblems(vars)
		grants, account, err := showGrants(c)
		if err != nil {
			return err
		}
		p.Problems = append(p.Problems, s.grantProblems(grants, account, p.MariaDB)...)
		return nil
	})
	if err != nil {
		return Prerequisites{}, fmt.Errorf("check the prerequisites of %s: %w", s.dsn, err)
	}
	return p, nil
}

var checkedVariables = []string{"version", "log_bin", "binlog_format", "binlog_row_image",
	"binlog_row_metadata", "expire_logs_days", "binlog_expire_logs_seconds"}

// variables reads the checked global variables; a variable the server
// lacks is absent from the map.
func variables(c *client.Conn) (map[string]string, error) {
	r, err := query(c, "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN ('"+
		strings.ToUpper(strings.Join(checkedVariables, "','"))+"')")
	if err != nil {
		return nil, fmt.Errorf("read the server's variables: %w", err)
	}
	vars := map[string]string{}
	for i := range r.RowNumber() {
		vars[strings.ToLower(getString(r, i, 0))] = getString(r, i, 1)
	}
	return vars, nil
}

func settingProblems(vars map[string]string) []Problem {
	var ps []Problem
	if vars["log_bin"] != "ON" {
		ps = append(ps, Problem{"log_bin", "the binary log is off",
			"add `log_bin = mysql-bin` and `server_id = 1` (any id unique among the servers) under [mysqld] in my.cnf and restart the server"})
	}
	want := []struct{ name, value, why string }{
		{"binlog_format", "ROW", "tidemark reads row events; STATEMENT and MIXED log statements it cannot apply"},
		{"binlog_row_image", "FULL", "a backfill's window merge lets the last change of a key decide the row, which needs every column in every change; MINIMAL and NOBLOB leave columns out"},
		{"binlog_row_metadata", "FULL", "column names, signedness and charsets travel with each table map, so that a restart from an old position decodes rows written before a DDL"},
	}
	for _, w := range want {
		got, ok := vars[w.name]
		if strings.EqualFold(got, w.value) {
			continue
		}
		if !ok {
			got = "not supported by this server version"
		}
		ps = append(ps, Problem{w.name, fmt.Sprintf("%s (%s)", got, w.why),
			fmt.Sprintf("SET GLOBAL %s = '%s'; and `%s = %s` under [mysqld] in my.cnf, so it survives a restart", w.name, w.value, w.name, w.value)})
	}
	return ps
}

func retention(vars map[string]string) time.Duration {
	if s, err := strconv.ParseFloat(vars["binlog_expire_logs_seconds"], 64); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if d, err := strconv.ParseFloat(vars["expire_logs_days"], 64); err == nil && d > 0 {
		return time.Duration(d * float64(24*time.Hour))
	}
	return 0
}

// grant is one GRANT line: its privileges and what they are on.
type grant struct {
	privileges []string
	on         string // "*.*", "`db`.*", "`db`.`t`"
}

// showGrants reads the account's grants and its name as a GRANT names it
// ('user'@'host').
func showGrants(c *client.Conn) ([]grant, string, error) {
	r, err := query(c, "SELECT CURRENT_USER()")
	if err != nil {
		return nil, "", fmt.Errorf("read the account's name: %w", err)
	}
	user, host, _ := strings.Cut(getString(r, 0, 0), "@")
	account := quoteString(user) + "@" + quoteString(host)
	if r, err = query(c, "SHOW GRANTS FOR CURRENT_USER()"); err != nil {
		return nil, "", fmt.Errorf("read the account's grants: %w", err)
	}
	var gs []grant
	for i := range r.RowNumber() {
		if g, ok := parseGrant(getString(r, i, 0)); ok {
			gs = append(gs, g)
		}
	}
	return gs, account, nil
}

// quoteString writes a string literal for a fix a person runs.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// parseGrant reads "GRANT p1, p2 ON target TO …"; roles and proxies are
// left out.
func parseGrant(line string) (grant, bool) {
	rest, ok := strings.CutPrefix(line, "GRANT ")
	if !ok {
		return grant{}, false
	}
	privs, rest, ok := strings.Cut(rest, " ON ")
	if !ok {
		return grant{}, false
	}
	on, _, _ := strings.Cut(rest, " TO ")
	g := grant{on: on}
	for p := range strings.SplitSeq(privs, ", ") {
		g.privileges = append(g.privileges, strings.TrimSpace(p))
	}
	return g, true
}

// grantProblems reports the privileges the account lacks: REPLICATION
// SLAVE and REPLICATION CLIENT (BINLOG MONITOR on MariaDB 10.5 and later)
// on *.*, SELECT on the database.
func (s *Source) grantProblems(gs []grant, account string, mariadb bool) []Problem {
	has := func(priv string, targets ...string) bool {
		for _, g := range gs {
			for _, t := range targets {
				if g.on == t && (containsPriv(g.privileges, priv) || containsPriv(g.privileges, "ALL PRIVILEGES")) {
					return true
				}
			}
		}
		return false
	}
	var missing []string
	for _, p := range []string{"REPLICATION SLAVE", "REPLICATION CLIENT"} {
		if has(p, "*.*") || (p == "REPLICATION CLIENT" && mariadb && has("BINLOG MONITOR", "*.*")) {
			continue
		}
		missing = append(missing, p)
	}
	var ps []Problem
	if len(missing) > 0 {
		ps = append(ps, Problem{"grants", "the account lacks " + strings.Join(missing, " and ") + " on *.* (reading the binlog and its positions needs them)",
			"GRANT " + strings.Join(missing, ", ") + " ON *.* TO " + account + ";"})
	}
	if !has("SELECT", "*.*", quoteIdent(s.dsn.Database)+".*") {
		ps = append(ps, Problem{"grants", "the account lacks SELECT on " + quoteIdent(s.dsn.Database) + " (backfills read the tables)",
			"GRANT SELECT ON " + quoteIdent(s.dsn.Database) + ".* TO " + account + ";"})
	}
	return ps
}

func containsPriv(privs []string, p string) bool {
	for _, x := range privs {
		if x == p {
			return true
		}
	}
	return false
}
