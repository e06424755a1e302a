package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/mysqlserver"
)

// TestDoctorMySQL runs `tidemark doctor -c FILE` on a stream from MariaDB:
// a server with the binlog tidemark needs passes every check; one started
// with binlog_format=STATEMENT fails that check with the exact fix, and
// the password shows in neither.
func TestDoctorMySQL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := func(name string, settings map[string]string) string {
		t.Helper()
		_, dsn := mysqlserver.ForTest(t, mysqlserver.Options{Settings: settings}, "shop", "CREATE TABLE orders (id int PRIMARY KEY, v text)")
		path := filepath.Join(dir, name+".yaml")
		err := os.WriteFile(path, fmt.Appendf(nil, `metadata: "sqlite://%s"
streams:
  - name: shop
    source: {type: mysql, dsn: "%s"}
    destination: {type: sqlite, path: "%s"}
    include: ["shop.*"]
`, filepath.Join(dir, name+"-meta.db"), dsn, filepath.Join(dir, name+"-dest.db")), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := config("good", nil)
	statement := config("statement", map[string]string{"binlog-format": "STATEMENT"})
	noPassword := func(r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, mysqlserver.Password) {
			t.Errorf("the password shows: %s", r)
		}
	}

	r := expect(t, 0, []string{
		"OK    stream shop: source", "(MariaDB 10.",
		"OK    stream shop: binlog", "row-based binlog with full row images and metadata",
		"OK    stream shop: binlog retention", "OK    stream shop: table keys", "0 FAIL",
	}, "doctor", "-c", good)
	noPassword(r)

	r = expect(t, 1, []string{"1 check failed"}, "doctor", "-c", statement)
	noPassword(r)
	for _, want := range []string{
		"OK    stream shop: source",
		"FAIL  stream shop: binlog_format", "STATEMENT (tidemark reads row events",
		"fix: SET GLOBAL binlog_format = 'ROW'; and `binlog_format = ROW` under [mysqld] in my.cnf",
		" 1 FAIL",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor on a STATEMENT binlog: want %q in\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "row-based binlog with full row images") {
		t.Errorf("doctor on a STATEMENT binlog says the binlog is fine:\n%s", r.stdout)
	}
}
