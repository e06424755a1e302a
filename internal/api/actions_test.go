package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAuditRecordsActions: every request that may change something is in
// the audit trail with who sent it, as kind=action (and kind=all): a pause
// and a resume by an admin token through the CLI, a rate change refused
// for an unknown backfill, and a pause the viewer token may not do; reads
// are not recorded, and the default trail still lists only backfills.
func TestAuditRecordsActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{backfill: "{mode: manual}",
		api: "{tokens: [{name: ops, token: tok-ops, role: admin}, {name: ro, token: tok-ro, role: viewer}]}"})
	ops := []string{"Authorization", "Bearer tok-ops", "X-Tidemark-Client", "cli"}
	ro := []string{"Authorization", "Bearer tok-ro"}
	e.ok(http.StatusAccepted, nil, "POST", "/api/v1/streams/"+e.name+"/pause", "", ops...)
	e.ok(http.StatusAccepted, nil, "POST", "/api/v1/streams/"+e.name+"/resume", "", ops...)
	e.fails(http.StatusNotFound, "not_found", "PATCH", "/api/v1/backfills/999", `{"rows_per_second": 5}`, ops...)
	e.fails(http.StatusForbidden, "forbidden", "POST", "/api/v1/streams/"+e.name+"/pause", "", ro...)
	e.ok(http.StatusOK, nil, "GET", "/api/v1/streams", "", ops...)

	var rows []auditRow
	e.ok(http.StatusOK, &rows, "GET", "/api/v1/audit?kind=action", "", ro...)
	type want struct{ name, state, who, options string }
	wants := []want{
		{"POST /api/v1/streams/" + e.name + "/pause", "refused", "api:ro", ""},
		{"PATCH /api/v1/backfills/999", "refused", "cli:ops", `{"rows_per_second":5}`},
		{"POST /api/v1/streams/" + e.name + "/resume", "done", "cli:ops", ""},
		{"POST /api/v1/streams/" + e.name + "/pause", "done", "cli:ops", ""},
	}
	if len(rows) != len(wants) {
		t.Fatalf("actions %s, want %d", keys(rows), len(wants))
	}
	for i, w := range wants {
		r := rows[i]
		if r.Kind != "action" || r.Name != w.name || r.State != w.state || r.StartedBy != w.who || compact(r.Options) != w.options {
			t.Errorf("action %d = %+v (options %s), want %+v", i, r.AuditRecord, r.Options, w)
		}
	}
	var status struct{ Status int }
	if json.Unmarshal(rows[0].Figures, &status) != nil || status.Status != http.StatusForbidden {
		t.Errorf("the viewer's pause figures %s, want status 403", rows[0].Figures)
	}

	e.ok(http.StatusOK, &rows, "GET", "/api/v1/audit?kind=action&started_by=cli:ops", "", ro...)
	if len(rows) != 3 {
		t.Errorf("actions of cli:ops %s, want 3", keys(rows))
	}
	e.ok(http.StatusOK, &rows, "GET", "/api/v1/audit", "", ro...)
	for _, r := range rows {
		if r.Kind == "action" {
			t.Errorf("the default trail lists action %+v: it lists backfills only", r.AuditRecord)
		}
	}
	e.ok(http.StatusOK, &rows, "GET", "/api/v1/audit?kind=all", "", ro...)
	if len(rows) < 4 {
		t.Errorf("kind=all lists %s, want the actions too", keys(rows))
	}
	for _, q := range []string{"kind=action&stream=" + e.name, "kind=action&state=done", "kind=action&task=x"} {
		if msg := e.fails(http.StatusBadRequest, "bad_request", "GET", "/api/v1/audit?"+q, "", ro...); !strings.Contains(msg, "kind=action") {
			t.Errorf("%s: %q does not say to leave the filter out with kind=action", q, msg)
		}
	}
}
