package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/tidemark/tidemark/internal/api"
	"github.com/tidemark/tidemark/internal/batch/plan"
	"github.com/tidemark/tidemark/internal/config"
)

// openRoutes are the operations that never ask for a token.
var openRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true, "GET /api/v1/openapi.yaml": true}

// oapi is the parsed OpenAPI document.
type oapi struct {
	t    *testing.T
	root map[string]any
}

func openapiDoc(t *testing.T) oapi {
	t.Helper()
	var root map[string]any
	if err := yaml.Unmarshal(api.OpenAPI(), &root); err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	return oapi{t: t, root: root}
}

// obj is the mapping at v; a YAML mapping with keys that are not all
// strings (say an unquoted status code) fails the test.
func (d oapi) obj(where string, v any) map[string]any {
	d.t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		d.t.Fatalf("%s: %T is not a mapping with string keys", where, v)
	}
	return m
}

// pointer resolves a local reference ("#/components/schemas/Backfill").
func (d oapi) pointer(ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = d.root
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// deref follows $ref until a mapping without one.
func (d oapi) deref(where string, m map[string]any) map[string]any {
	d.t.Helper()
	for range 10 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		v, ok := d.pointer(ref)
		if !ok {
			d.t.Fatalf("%s: $ref %q does not resolve", where, ref)
		}
		m = d.obj(ref, v)
	}
	d.t.Fatalf("%s: $ref chain too long", where)
	return nil
}

var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true, "options": true, "head": true, "patch": true, "trace": true}

// operations returns the document's operations by "METHOD /path".
func (d oapi) operations() map[string]map[string]any {
	d.t.Helper()
	out := map[string]map[string]any{}
	for path, item := range d.obj("paths", d.root["paths"]) {
		for method, op := range d.obj(path, item) {
			if httpMethods[method] {
				out[strings.ToUpper(method)+" "+path] = d.obj(method+" "+path, op)
			}
		}
	}
	return out
}

// routeKey turns a mux pattern ("GET /api/v1/streams/{stream}") into an
// operation key: the method, a space and the OpenAPI path.
func routeKey(pattern string) (string, error) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("route %q has no method or no absolute path", pattern)
	}
	path = strings.ReplaceAll(path, "...}", "}")
	path = strings.TrimSuffix(path, "{$}")
	return method + " " + path, nil
}

// pathParams are the names of path's {param} segments, sorted.
func pathParams(path string) []string {
	var names []string
	for seg := range strings.SplitSeq(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			names = append(names, strings.Trim(seg, "{}"))
		}
	}
	sort.Strings(names)
	return names
}

// TestOpenAPIDescribesEveryRoute checks both ways that the document's
// operations are the routes the server registers, that each operation's
// path parameters are its path's, and, without a token on a server with
// tokens, that exactly the operations documented as open answer without
// 401.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	srv := idleServer(t, []config.Token{{Name: "ci", Token: "s3cret", Role: config.RoleViewer}})
	d := openapiDoc(t)
	ops := d.operations()
	routed := map[string]bool{}
	for _, p := range srv.Routes() {
		key, err := routeKey(p)
		if err != nil {
			t.Error(err)
			continue
		}
		routed[key] = true
		if ops[key] == nil {
			t.Errorf("route %q is not in openapi.yaml (as %q)", p, key)
		}
	}
	for key := range ops {
		if !routed[key] {
			t.Errorf("openapi.yaml documents %s, which is not a route", key)
		}
	}

	items := d.obj("paths", d.root["paths"])
	for key, op := range ops {
		method, path, _ := strings.Cut(key, " ")
		var names []string
		for _, list := range []any{d.obj(path, items[path])["parameters"], op["parameters"]} {
			ps, _ := list.([]any)
			for i, p := range ps {
				pm := d.deref(fmt.Sprintf("%s parameter %d", key, i), d.obj(key, p))
				if pm["in"] == "path" {
					names = append(names, fmt.Sprint(pm["name"]))
					if pm["required"] != true {
						t.Errorf("%s: path parameter %v is not required", key, pm["name"])
					}
				}
			}
		}
		sort.Strings(names)
		if want := pathParams(path); !slices.Equal(names, want) {
			t.Errorf("%s: path parameters %v, want %v", key, names, want)
		}
		if _, ok := op["responses"].(map[string]any); !ok {
			t.Errorf("%s: no responses", key)
		}

		sec, hasSec := op["security"]
		open := hasSec && reflect.DeepEqual(sec, []any{})
		if open != openRoutes[key] {
			t.Errorf("%s: documented open (security: []) is %v, want %v", key, open, openRoutes[key])
		}
		if !routed[key] {
			continue
		}
		concrete := strings.NewReplacer("{stream}", "alpha", "{id}", "1", "{task}", "p.a").Replace(path)
		ctx, cancel := context.WithCancel(context.Background())
		rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: cancel}
		srv.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, concrete, nil))
		cancel()
		if got := rec.Code == http.StatusUnauthorized; got == open {
			t.Errorf("%s %s without a token: HTTP %d, documented open: %v", method, concrete, rec.Code, open)
		}
	}
	if sec := d.root["security"]; !reflect.DeepEqual(sec, []any{map[string]any{"bearerAuth": []any{}}, map[string]any{}}) {
		t.Errorf("top-level security = %v, want bearerAuth or none (tokens are optional)", sec)
	}
}

// The daemon's API serves the embedded document without a token even when
// tokens are configured.
func TestOpenAPIServedWithoutToken(t *testing.T) {
	srv := api.New(nil, nil, nil, []config.Token{{Name: "ci", Token: "s3cret", Role: config.RoleViewer}}, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	get := func(path string, headers ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	for _, headers := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Bearer s3cret"}} {
		resp, body := get("/api/v1/openapi.yaml", headers...)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" {
			t.Fatalf("GET /api/v1/openapi.yaml %v: HTTP %d %q %s", headers, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if !bytes.Equal(body, api.OpenAPI()) {
			t.Fatalf("GET /api/v1/openapi.yaml %v: the body is not the embedded document", headers)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(body, &doc); err != nil || doc["openapi"] != "3.0.3" {
			t.Fatalf("served document: openapi %v, %v", doc["openapi"], err)
		}
		info, _ := doc["info"].(map[string]any)
		if info["title"] != "tidemark" || info["version"] != "v1" {
			t.Fatalf("info = %v", info)
		}
	}
	// Tokens are configured: an authenticated route refuses the same request.
	if resp, body := get("/api/v1/streams"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /api/v1/streams without a token: HTTP %d %s, want 401", resp.StatusCode, body)
	}
}

var schemaKeywords = map[string]bool{
	"$ref": true, "type": true, "format": true, "description": true, "title": true, "enum": true, "default": true,
	"example": true, "nullable": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "oneOf": true, "anyOf": true, "allOf": true, "not": true, "minimum": true, "maximum": true,
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "pattern": true,
	"readOnly": true, "writeOnly": true, "uniqueItems": true, "deprecated": true,
}

// TestOpenAPIReferencesResolve checks that every $ref of the document
// resolves to a component of its kind, and that every schema uses only
// schema keywords (a stray comma in a YAML flow mapping makes a key of
// prose) with its required properties among its properties.
func TestOpenAPIReferencesResolve(t *testing.T) {
	d := openapiDoc(t)
	components := d.obj("components", d.root["components"])
	refs := 0
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"]; ok {
				refs++
				s, _ := ref.(string)
				kind, name, ok := strings.Cut(strings.TrimPrefix(s, "#/components/"), "/")
				if !strings.HasPrefix(s, "#/components/") || !ok || strings.Contains(name, "/") {
					t.Errorf("%s: $ref %q is not #/components/KIND/NAME", where, ref)
				} else if _, ok := d.pointer(s); !ok {
					t.Errorf("%s: $ref %q does not resolve", where, s)
				} else if want := refKind(where); want != "" && kind != want {
					t.Errorf("%s: $ref %q should be to a %s component", where, s, want)
				}
				if len(v) != 1 {
					t.Errorf("%s: $ref %q has siblings, which OpenAPI 3.0 ignores", where, s)
				}
			}
			for k, sub := range v {
				walk(where+"/"+k, sub)
			}
		case []any:
			for i, sub := range v {
				walk(where+"/"+strconv.Itoa(i), sub)
			}
		}
	}
	walk("#", d.root)
	if refs < 50 {
		t.Errorf("only %d $refs: the walk is broken", refs)
	}

	var checkSchema func(where string, v any)
	checkSchema = func(where string, v any) {
		s, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: a schema is a mapping, not %T", where, v)
			return
		}
		for k := range s {
			if !schemaKeywords[k] && !strings.HasPrefix(k, "x-") {
				t.Errorf("%s: %q is not a schema keyword", where, k)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			checkSchema(where+"/properties/"+name, p)
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := props[fmt.Sprint(r)]; !ok {
				t.Errorf("%s: required %v is not a property", where, r)
			}
		}
		if it, ok := s["items"]; ok {
			checkSchema(where+"/items", it)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			checkSchema(where+"/additionalProperties", ap)
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			alts, _ := s[k].([]any)
			for i, a := range alts {
				checkSchema(fmt.Sprintf("%s/%s/%d", where, k, i), a)
			}
		}
	}
	for name, s := range d.obj("schemas", components["schemas"]) {
		checkSchema("#/components/schemas/"+name, s)
	}
	var findSchemas func(where string, v any)
	findSchemas = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if k == "schema" {
					checkSchema(where+"/schema", sub)
				} else {
					findSchemas(where+"/"+k, sub)
				}
			}
		case []any:
			for i, sub := range v {
				findSchemas(where+"/"+strconv.Itoa(i), sub)
			}
		}
	}
	findSchemas("#/paths", d.root["paths"])
	findSchemas("#/components/parameters", components["parameters"])
	findSchemas("#/components/responses", components["responses"])
}

// refKind is the component kind a $ref at where must name, or "" when the
// test does not know.
func refKind(where string) string {
	parts := strings.Split(where, "/")
	parent := parts[len(parts)-2]
	switch {
	case slices.Contains(parts, "schema") || slices.Contains(parts, "schemas"):
		return "schemas"
	case parent == "parameters":
		return "parameters"
	case parent == "responses":
		return "responses"
	}
	return ""
}

// TestOpenAPISchemasMatchGoTypes checks each component schema of a Go type
// against the type's JSON field names: the properties are exactly the
// fields, and for responses the required properties are exactly the
// fields that are never left out (no omitempty).
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	d := openapiDoc(t)
	schemas := d.obj("schemas", d.obj("components", d.root["components"])["schemas"])
	// fieldType is the (pointed to) type of a struct field, nil when there
	// is none; the test fails then.
	fieldType := func(v any, name string) reflect.Type {
		f, ok := reflect.TypeOf(v).FieldByName(name)
		if !ok {
			t.Errorf("%T has no field %s", v, name)
			return nil
		}
		if f.Type.Kind() == reflect.Pointer {
			return f.Type.Elem()
		}
		return f.Type
	}
	for _, c := range []struct {
		schema   string
		typ      any // a struct value or its reflect.Type
		response bool
	}{
		{"StreamView", api.StreamView{}, true},
		{"StreamState", api.StreamStateView{}, true},
		{"ColumnInfo", api.ColumnView{}, true},
		{"ObjectView", api.ObjectView{}, true},
		{"ObjectsRequest", api.ObjectsRequest{}, false},
		{"InitiateRequest", api.InitiateRequest{}, false},
		{"RateRequest", api.RateRequest{}, false},
		{"Backfill", api.BackfillView{}, true},
		{"VerifySummary", api.VerifyView{}, true},
		{"RunView", api.RunView{}, true},
		{"VerifyRequest", api.VerifyRequest{}, false},
		{"ObjectCheck", api.CheckView{}, true},
		{"Estimate", api.EstimateView{}, true},
		{"ObjectEstimate", api.ObjectEstimateView{}, true},
		{"RangeCheck", api.RangeView{}, true},
		{"StreamEvent", api.StreamEventView{}, true},
		{"LagAlert", fieldType(api.StreamEventView{}, "Lag"), true},
		{"BatchEvent", api.BatchEventView{}, true},
		{"Param", api.ParamView{}, true},
		{"TaskView", api.TaskView{}, true},
		{"PlanRequest", plan.Request{}, false},
		{"PlanDates", plan.Dates{}, false},
		{"PlanTimeRange", plan.TimeRange{}, false},
		{"PlanScope", plan.Scope{}, false},
		{"PlanView", api.PlanView{}, true},
		{"PlannedInstance", api.PlannedInstance{}, true},
		{"SubmitResponse", api.SubmitResponse{}, true},
		{"BatchBackfill", api.BatchBackfillView{}, true},
		{"BatchInstance", api.BatchInstanceView{}, true},
		{"LogView", api.LogView{}, true},
		{"RerunRequest", api.RerunRequest{}, false},
		{"AuditRecord", api.AuditRecord{}, true},
		{"StreamFigures", api.StreamFigures{}, true},
		{"BatchFigures", api.BatchFigures{}, true},
		{"Unknown", api.Unknown{}, true},
	} {
		rt, ok := c.typ.(reflect.Type)
		if !ok {
			rt = reflect.TypeOf(c.typ)
		}
		if rt == nil {
			continue
		}
		s := d.obj(c.schema, schemas[c.schema])
		var fields, always []string
		for i := range rt.NumField() {
			f := rt.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			fields = append(fields, name)
			if !slices.Contains(strings.Split(opts, ","), "omitempty") {
				always = append(always, name)
			}
		}
		props := slices.Sorted(maps.Keys(d.obj(c.schema+" properties", s["properties"])))
		if sort.Strings(fields); !slices.Equal(props, fields) {
			t.Errorf("%s: properties %v, %s has %v", c.schema, props, rt, fields)
		}
		if !c.response {
			continue
		}
		var req []string
		list, _ := s["required"].([]any)
		for _, r := range list {
			req = append(req, fmt.Sprint(r))
		}
		sort.Strings(req)
		if sort.Strings(always); !slices.Equal(req, always) {
			t.Errorf("%s: required %v, %s always has %v", c.schema, req, rt, always)
		}
	}
}

// TestOpenAPIDescribesResponses sends requests to real handlers and checks
// each answer against the document: its status is documented for the
// operation, its content type is the documented one, and its JSON body
// fits the documented schema (every key a property, the required ones
// present, the types, nulls and enumerations as documented).
func TestOpenAPIDescribesResponses(t *testing.T) {
	srv := idleServer(t, nil)
	d := openapiDoc(t)
	ops := d.operations()
	do := func(method, target, body string) any {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: cancel}
		req := httptest.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		srv.ServeHTTP(rec, req)
		path, _, _ := strings.Cut(target, "?")
		key, op := matchOperation(ops, method, path)
		if op == nil {
			t.Fatalf("%s %s: no documented operation", method, target)
		}
		responses := d.obj(key+" responses", op["responses"])
		r, ok := responses[strconv.Itoa(rec.Code)]
		if !ok {
			t.Errorf("%s %s: HTTP %d is not documented for %s: %s", method, target, rec.Code, key, rec.Body)
			return nil
		}
		resp := d.deref(key+" "+strconv.Itoa(rec.Code), d.obj(key, r))
		content, _ := resp["content"].(map[string]any)
		ct, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		if err != nil || content[ct] == nil {
			t.Errorf("%s %s: HTTP %d with content type %q, documented %v", method, target, rec.Code, rec.Header().Get("Content-Type"), slices.Collect(maps.Keys(content)))
			return nil
		}
		if ct != "application/json" {
			return nil
		}
		dec := json.NewDecoder(rec.Body)
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		schema := d.obj(key+" schema", d.obj(key+" "+ct, content[ct])["schema"])
		for _, e := range d.check("$", schema, v) {
			t.Errorf("%s %s (HTTP %d): %s", method, target, rec.Code, e)
		}
		return v
	}
	id := func(v any) string {
		t.Helper()
		m, _ := v.(map[string]any)
		n, ok := m["id"].(json.Number)
		if !ok {
			t.Fatalf("no id in %v", v)
		}
		return n.String()
	}

	do("GET", "/healthz", "")
	do("GET", "/api/v1/openapi.yaml", "")
	for _, open := range []string{"/readyz", "/metrics"} { // documented ahead of routing
		if slices.Contains(srv.Routes(), "GET "+open) {
			do("GET", open, "")
		}
	}
	do("GET", "/api/v1/streams", "")
	do("GET", "/api/v1/streams/alpha", "")
	do("GET", "/api/v1/streams/nope", "")
	do("POST", "/api/v1/streams/beta/pause", "")
	do("GET", "/api/v1/streams/alpha/objects", "")
	started, _ := do("POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.a", "b"]}`).([]any)
	if len(started) != 2 {
		t.Fatalf("initiated %v", started)
	}
	do("POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.a"]}`) // 409: pending
	do("POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.*"]}`) // 400
	// 404s naming what is unknown, with suggestions (issue 16).
	for _, unknown := range [][2]string{
		{"POST", "/api/v1/streams/alpha/backfills"}, {"POST", "/api/v1/streams/alpha/backfills/stop"},
		{"GET", "/api/v1/streams/alpha/estimate?object=public.aa"}, {"GET", "/api/v1/backfills?stream=alpah"},
		{"GET", "/api/v1/backfills?object=public.aa"}, {"GET", "/api/v1/streams/alpah/objects"},
		{"GET", "/api/v1/audit?stream=alpah"},
	} {
		v, _ := do(unknown[0], unknown[1], `{"objects": ["public.aa"]}`).(map[string]any)
		e, _ := v["error"].(map[string]any)
		if u, _ := e["unknown"].([]any); len(u) != 1 {
			t.Errorf("%s %s: %v, want error.unknown", unknown[0], unknown[1], v)
		}
	}
	do("POST", "/api/v1/streams/alpha/backfills", `{"objects": ["`+strings.Repeat("x", 1<<20)+`"]}`)
	do("POST", "/api/v1/streams/alpha/backfills/stop", `{"objects": ["public.a"]}`)
	do("GET", "/api/v1/backfills?stream=alpha&status=stopped", "")
	do("GET", "/api/v1/backfills?status=nope", "")
	do("GET", "/api/v1/backfills/"+id(started[1]), "")
	do("GET", "/api/v1/backfills/999999", "")
	do("POST", "/api/v1/streams/alpha/verify", "")                   // 409: not running
	do("POST", "/api/v1/streams/alpha/verify", `{"chunk_size": -1}`) // 400
	do("GET", "/api/v1/events?stream=beta", "")
	do("GET", "/api/v1/events?stream=nope", "")

	do("GET", "/api/v1/tasks", "")
	do("GET", "/api/v1/tasks/p.a", "")
	do("GET", "/api/v1/tasks/nope", "")
	req := `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-03"}, "scope": {"mode": "list", "downstream": -1}, "groups": 2}`
	do("POST", "/api/v1/batch/preview?tz=Europe/Paris&limit=5", req)
	do("POST", "/api/v1/batch/preview", `{"task": "a", "dates": {"mode": "bogus"}}`)
	do("POST", "/api/v1/batch/preview?tz=Mars/Olympus", req)
	sub, _ := do("POST", "/api/v1/batch/backfills?tz=Asia/Shanghai", `{"task": "a", "dates": {"from": "2025-01-01", "to": "2025-01-02"}, "scope": {"mode": "list", "downstream": 1}, "paused": "run"}`).(map[string]any)
	bf := id(sub["backfill"])
	do("GET", "/api/v1/batch/backfills", "")
	do("GET", "/api/v1/batch/backfills/"+bf, "")
	do("GET", "/api/v1/batch/backfills/x", "")
	insts, _ := do("GET", "/api/v1/batch/backfills/"+bf+"/instances?limit=10", "").([]any)
	if len(insts) == 0 {
		t.Fatalf("backfill %s has no instances", bf)
	}
	in := id(insts[0])
	do("GET", "/api/v1/batch/backfills/"+bf+"/nodes.csv", "")
	do("GET", "/api/v1/batch/instances?scheduled=true", "")
	do("GET", "/api/v1/batch/instances?task=p.a", "")
	do("GET", "/api/v1/batch/instances/"+in, "")
	do("GET", "/api/v1/batch/instances/"+in+"/log", "")
	do("POST", "/api/v1/batch/instances/"+in+"/stop", "")
	do("POST", "/api/v1/batch/instances/"+in+"/rerun", "")
	do("POST", "/api/v1/batch/instances/"+in+"/mark-succeeded", "")
	do("POST", "/api/v1/batch/backfills/"+bf+"/stop", "")
	do("POST", "/api/v1/batch/backfills/"+bf+"/rerun", "")
	do("POST", "/api/v1/batch/backfills/"+bf+"/rerun", `{"instances": [999999]}`)
	do("GET", "/api/v1/batch/backfills/"+bf, "")

	// Both kinds exist now: the stopped and pending stream backfills of
	// alpha and the batch backfill.
	trail, _ := do("GET", "/api/v1/audit", "").([]any)
	if len(trail) != 3 {
		t.Errorf("audit trail of %d records, want 3: %v", len(trail), trail)
	}
	do("GET", "/api/v1/audit?kind=stream&stream=alpha&object=public.a&state=stopped&started_by=api&limit=5", "")
	do("GET", "/api/v1/audit?task=p.a&since=2020-01-01T00:00:00Z&until=2100-01-01T00:00:00Z", "")
	do("GET", "/api/v1/audit?format=csv", "")
	do("GET", "/api/v1/audit?kind=batch&state=active", "")
	do("GET", "/api/v1/audit?kind=nope", "")

	// A run of two backfills: its view, another stream's view of it, its
	// stop, and a stop of the run once it has ended.
	members, _ := do("POST", "/api/v1/streams/alpha/backfills", `{"objects": ["public.a", "\"my.schema\".\"T x\""], "as_one_run": true}`).([]any)
	if len(members) != 2 {
		t.Fatalf("initiated as one run: %v", members)
	}
	first, _ := members[0].(map[string]any)
	run, _ := first["run_id"].(json.Number)
	do("GET", "/api/v1/runs/"+run.String(), "")
	do("GET", "/api/v1/runs/999999", "")
	do("GET", "/api/v1/runs/x", "")
	do("GET", "/api/v1/streams/alpha/runs/"+run.String(), "")
	do("GET", "/api/v1/streams/beta/runs/"+run.String(), "") // 404: alpha's
	do("GET", "/api/v1/streams/alpha/runs/999999", "")
	do("GET", "/api/v1/streams/alpha/runs/x", "")
	do("POST", "/api/v1/runs/"+run.String()+"/stop", "")
	do("POST", "/api/v1/runs/"+run.String()+"/stop", "")               // 409: ended
	do("POST", "/api/v1/streams/alpha/runs/"+run.String()+"/stop", "") // 409: ended
	do("POST", "/api/v1/runs/999999/stop", "")
}

// matchOperation finds the operation whose path template matches path,
// preferring literal segments as the mux does.
func matchOperation(ops map[string]map[string]any, method, path string) (string, map[string]any) {
	segs := strings.Split(path, "/")
	best, bestLiterals := "", -1
	for key := range ops {
		m, tmpl, _ := strings.Cut(key, " ")
		if m != method {
			continue
		}
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		literals := 0
		for i, s := range ts {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && segs[i] != "" {
				continue
			}
			if s != segs[i] {
				literals = -1
				break
			}
			literals++
		}
		if literals > bestLiterals {
			best, bestLiterals = key, literals
		}
	}
	if bestLiterals < 0 {
		return "", nil
	}
	return best, ops[best]
}

// check returns how v does not fit schema.
func (d oapi) check(at string, schema map[string]any, v any) []string {
	s := d.deref(at, schema)
	if all, ok := s["allOf"].([]any); ok {
		var errs []string
		for _, a := range all {
			errs = append(errs, d.check(at, d.obj(at, a), v)...)
		}
		return errs
	}
	if alts, ok := s["oneOf"].([]any); ok {
		var errs []string
		for i, a := range alts {
			e := d.check(at, d.obj(at, a), v)
			if len(e) == 0 {
				return nil
			}
			errs = append(errs, fmt.Sprintf("oneOf %d: %s", i, strings.Join(e, "; ")))
		}
		return errs
	}
	if v == nil {
		if s["nullable"] == true {
			return nil
		}
		return []string{at + " is null, not documented nullable"}
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	switch typ := s["type"]; typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			bad("%T, documented an object", v)
			break
		}
		props, _ := s["properties"].(map[string]any)
		for k, sub := range m {
			switch p, ap := props[k], s["additionalProperties"]; {
			case p != nil:
				errs = append(errs, d.check(at+"."+k, d.obj(at+"."+k, p), sub)...)
			case ap == true:
			case ap != nil && ap != false:
				errs = append(errs, d.check(at+"."+k, d.obj(at+"."+k, ap), sub)...)
			default:
				bad("key %q is not a documented property", k)
			}
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := m[fmt.Sprint(r)]; !ok {
				bad("required key %q is missing", r)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			bad("%T, documented an array", v)
			break
		}
		for i, e := range a {
			errs = append(errs, d.check(fmt.Sprintf("%s[%d]", at, i), d.obj(at, s["items"]), e)...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("%T, documented a string", v)
			break
		}
		if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, any(str)) {
			bad("%q is not one of %v", str, enum)
		}
	case "integer":
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			bad("%v, documented an integer", v)
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			bad("%v, documented a number", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("%v, documented a boolean", v)
		}
	default:
		bad("schema type %v is not checked", typ)
	}
	return errs
}
