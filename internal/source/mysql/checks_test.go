package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidemark/tidemark/internal/mysqlserver"
)

// TestCheckGoodServer: the harness's server and account meet every
// prerequisite.
func TestCheckGoodServer(t *testing.T) {
	src, _ := testDB(t)
	p, err := src.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Problems) != 0 || !p.MariaDB {
		t.Fatalf("problems on a well-set server: %+v", p)
	}
	if p.Retention != 0 || !strings.Contains(p.RetentionText(), "not purged") {
		t.Errorf("retention %v: %s", p.Retention, p.RetentionText())
	}
}

// TestCheckWrongServer starts a server with every setting wrong and an
// account with SELECT only, and expects every problem at once, each with
// its fix.
func TestCheckWrongServer(t *testing.T) {
	ctx := context.Background()
	srv, err := mysqlserver.Start(ctx, mysqlserver.Options{Settings: map[string]string{
		"log-bin": "", "binlog-format": "STATEMENT", "binlog-row-image": "MINIMAL",
		"binlog-row-metadata": "MINIMAL", "expire-logs-days": "3",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if _, err := srv.CreateDatabase(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	root, err := srv.Root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	exec(t, root, "CREATE TABLE shop.t (id int PRIMARY KEY)", "CREATE USER 'weak'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON `shop`.`t` TO 'weak'@'%'")
	src, err := Open(ctx, Config{DSN: "mysql://weak:pw@" + srv.Addr() + "/shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, err := src.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"log_bin":             "log_bin = mysql-bin",
		"binlog_format":       "SET GLOBAL binlog_format = 'ROW'",
		"binlog_row_image":    "SET GLOBAL binlog_row_image = 'FULL'",
		"binlog_row_metadata": "SET GLOBAL binlog_row_metadata = 'FULL'",
	}
	grants := []string{
		"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'weak'@'%';",
		"GRANT SELECT ON `shop`.* TO 'weak'@'%';",
	}
	var gotGrants []string
	for _, pr := range p.Problems {
		if pr.Check == "grants" {
			gotGrants = append(gotGrants, pr.Fix)
			continue
		}
		if w, ok := want[pr.Check]; !ok || !strings.Contains(pr.Fix, w) {
			t.Errorf("problem %s: fix %q, want it to contain %q", pr.Check, pr.Fix, w)
		}
		delete(want, pr.Check)
	}
	for c := range want {
		t.Errorf("no problem reported for %s", c)
	}
	if strings.Join(gotGrants, "\n") != strings.Join(grants, "\n") {
		t.Errorf("grant fixes:\n%s\nwant:\n%s", strings.Join(gotGrants, "\n"), strings.Join(grants, "\n"))
	}
	for _, pr := range p.Problems {
		if pr.Check == "binlog_row_image" && !strings.Contains(pr.Found, "window merge") {
			t.Errorf("binlog_row_image problem does not say why MINIMAL is refused: %s", pr)
		}
	}
	if p.Retention != 72*time.Hour {
		t.Errorf("retention = %v, want 72h", p.Retention)
	}
}
