package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/tidemark/tidemark/internal/stream"
)

// TestObjectNamesRoundTrip: the object field of the answers names a table
// with dots, quotes, spaces and upper case the way requests name objects
// (quoted), so a client passes it back as is: to initiate a backfill, to
// verify, to filter backfills and the audit trail.
func TestObjectNamesRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}", setup: `
		CREATE TABLE "Order Items.v2" (id int PRIMARY KEY); INSERT INTO "Order Items.v2" VALUES (1), (2);
		CREATE TABLE "it's ""x""; DROP TABLE plain; --" (id int PRIMARY KEY); INSERT INTO "it's ""x""; DROP TABLE plain; --" VALUES (3);
		CREATE TABLE plain (id int PRIMARY KEY); INSERT INTO plain VALUES (4);`})
	want := []string{`public."Order Items.v2"`, `public."it's ""x""; DROP TABLE plain; --"`, "public.plain"}
	e.waitFor("the objects", func() bool { return len(e.objects()) == 3 })
	var names []string
	for name, o := range e.objects() {
		if o.Status != "-" {
			t.Fatalf("%s is %q (%s), want -", name, o.Status, o.Reason)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("object names %q, want %q", names, want)
	}
	body, _ := json.Marshal(map[string][]string{"objects": names})
	if recs := e.initiate(http.StatusCreated, string(body)); len(recs) != 3 {
		t.Fatalf("initiated %+v", recs)
	}
	e.waitLoaded(names...)
	var checks []stream.ObjectCheck
	e.ok(http.StatusOK, &checks, "POST", "/api/v1/streams/"+e.name+"/verify", string(body))
	for i, c := range checks {
		if c.Object != names[i] || !c.Match || c.SourceRows == 0 {
			t.Errorf("verify %s: %+v", names[i], c)
		}
	}
	recs := e.backfills("object=" + url.QueryEscape(names[1]))
	if len(recs) != 1 || recs[0].Table != `it's "x"; DROP TABLE plain; --` || recs[0].Status != stream.StatusCompleted {
		t.Fatalf("backfills of %s: %+v", names[1], recs)
	}
	if rows := e.audit("object=" + url.QueryEscape(names[0])); len(rows) != 1 || rows[0].Object != names[0] || rows[0].Kind != "stream" {
		t.Errorf("audit records of %s: %+v", names[0], rows)
	}
}
