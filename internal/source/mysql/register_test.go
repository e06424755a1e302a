package mysql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
	"github.com/tidemark/tidemark/internal/doctor/check"
	"github.com/tidemark/tidemark/internal/mysqlserver"
	"github.com/tidemark/tidemark/internal/source"
)

// TestRegisteredDoctor: `tidemark doctor` runs the MySQL source's checks
// through the registry: connected, binlog settings met, retention told, and
// a table without a key warned about with the fix; a wrong password fails
// the source check and skips the others.
func TestRegisteredDoctor(t *testing.T) {
	src, _ := testDB(t, "CREATE TABLE keyed (id INT PRIMARY KEY)", "CREATE TABLE loose (v INT)")
	typ, err := source.Lookup(config.TypeMySQL)
	if err != nil {
		t.Fatal(err)
	}
	db := src.Database()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
streams:
  - name: shop
    source: {type: mysql, dsn: %q}
    destination: {type: sqlite, path: x.db}
    include: ["%s.*"]
`, server.DSN(db), db)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	in := source.DoctorInput{Stream: &cfg.Streams[0], Key: "streams[0]"}
	checks := typ.Doctor(context.Background(), in)
	want := map[string]check.Status{"source": check.OK, "binlog": check.OK, "binlog retention": check.OK, "table keys": check.Warn}
	for _, c := range checks {
		name := strings.TrimPrefix(c.Name, "stream shop: ")
		if w, ok := want[name]; ok && c.Status != w {
			t.Errorf("%s: %s (%s), want %s", name, c.Status, c.Detail, w)
		}
		delete(want, name)
		if name == "table keys" && (!strings.Contains(c.Detail, db+".loose") || !strings.Contains(c.Fix, "ADD PRIMARY KEY")) {
			t.Errorf("table keys check = %+v, want it to name %s.loose with the fix", c, db)
		}
	}
	if len(want) > 0 {
		t.Errorf("checks missing: %v (got %+v)", want, checks)
	}

	bad := cfg.Streams[0]
	bad.Source.DSN = strings.Replace(bad.Source.DSN, mysqlserver.Password, "wrong", 1)
	checks = typ.Doctor(context.Background(), source.DoctorInput{Stream: &bad, Key: "streams[0]"})
	if len(checks) != 1 || checks[0].Status != check.Fail || !strings.Contains(checks[0].Detail, "other checks were skipped") {
		t.Fatalf("wrong password: %+v, want one failed source check", checks)
	}
	if strings.Contains(checks[0].Detail, "wrong") {
		t.Errorf("the check shows the password: %s", checks[0].Detail)
	}
}

// TestPositionNotation: positions read as the binlog file's number and the
// offset in it, through the registry.
func TestPositionNotation(t *testing.T) {
	if got := source.FormatPosition(config.TypeMySQL, change.LSN(3<<32|1234)); got != "000003:1234" {
		t.Errorf("position = %q, want 000003:1234", got)
	}
}
