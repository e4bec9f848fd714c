package web

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
)

// openAPI is the parsed document.
type openAPI map[string]any

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	var doc openAPI
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	return doc
}

// operation returns the document's operation for method and path, or nil.
func (d openAPI) operation(method, path string) map[string]any {
	paths, _ := d["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return op
}

// resolve follows a "#/components/..." reference.
func (d openAPI) resolve(ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("reference %q is not local", ref)
	}
	var cur any = map[string]any(d)
	for _, part := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reference %q: %s is not an object", ref, part)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
	}
	return cur, nil
}

// openAPIMethods are the operation keys of an OpenAPI path item.
func openAPIMethods() []string {
	return []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
}

// TestOpenAPIMatchesRoutes: every route of apiRouteTable — the table that
// registers the mux — is in the document with exactly the statuses it
// answers, every operation of the document is a route, every reference
// resolves, and the mux really serves each route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v; want 3.1.0", doc["openapi"])
	}
	routes := append(apiRouteTable(), probeRouteTable()...)
	for _, rt := range routes {
		op := doc.operation(rt.Method, rt.Path)
		if op == nil {
			t.Errorf("%s %s is served but not documented", rt.Method, rt.Path)
			continue
		}
		resp, _ := op["responses"].(map[string]any)
		var documented []int
		for code := range resp {
			n, err := strconv.Atoi(code)
			if err != nil {
				t.Errorf("%s %s: response %q is not a status", rt.Method, rt.Path, code)
			}
			documented = append(documented, n)
		}
		slices.Sort(documented)
		served := slices.Sorted(slices.Values(rt.Statuses))
		if !slices.Equal(documented, served) {
			t.Errorf("%s %s: documented statuses %v; want the route's %v", rt.Method, rt.Path, documented, served)
		}
		sec, hasSec := op["security"].([]any)
		if public := hasSec && len(sec) == 0; public != rt.Public {
			t.Errorf("%s %s: documented as public %v; want %v", rt.Method, rt.Path, public, rt.Public)
		}
		for _, p := range pathParams(rt.Path) {
			if !documentsParam(doc, op, p, "path") {
				t.Errorf("%s %s: path parameter %s is not documented", rt.Method, rt.Path, p)
			}
		}
	}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method := range item.(map[string]any) {
			if !slices.Contains(openAPIMethods(), method) {
				continue
			}
			if !slices.ContainsFunc(routes, func(rt apiRoute) bool {
				return rt.Path == path && strings.EqualFold(rt.Method, method)
			}) {
				t.Errorf("%s %s is documented but not served", strings.ToUpper(method), path)
			}
		}
	}
	walkRefs(t, doc, doc, "")

	// The mux serves each route: no route_not_found or method_not_allowed.
	as := newAPISite(t, nil)
	for _, rt := range routes {
		path := strings.NewReplacer("{id}", "x", "{key}", "x").Replace(rt.Path)
		r := as.call(rt.Method, path, as.ci, "")
		if r.status == http.StatusMethodNotAllowed || r.status == http.StatusNotFound && r.header.Get("Content-Type") != "" &&
			strings.Contains(string(r.body), `"route_not_found"`) {
			t.Errorf("%s %s: %d %s; want the route served", rt.Method, path, r.status, r.body)
		}
	}
}

// pathParams lists a pattern's {name} segments.
func pathParams(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}

// documentsParam reports whether op lists parameter name in in.
func documentsParam(doc openAPI, op map[string]any, name, in string) bool {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		pm, _ := p.(map[string]any)
		if ref, ok := pm["$ref"].(string); ok {
			r, err := doc.resolve(ref)
			if err != nil {
				return false
			}
			pm, _ = r.(map[string]any)
		}
		if pm["name"] == name && pm["in"] == in {
			return true
		}
	}
	return false
}

// walkRefs checks that every $ref in v resolves.
func walkRefs(t *testing.T, doc openAPI, v any, at string) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if k == "$ref" {
				if _, err := doc.resolve(fmt.Sprint(val)); err != nil {
					t.Errorf("%s: %v", at, err)
				}
				continue
			}
			walkRefs(t, doc, val, at+"/"+k)
		}
	case []any:
		for i, val := range x {
			walkRefs(t, doc, val, at+"/"+strconv.Itoa(i))
		}
	}
}

// TestOpenAPISchemasMatchAnswers checks real answers of every route
// against the schema the document gives for their status: the document
// describes what the server sends, field by field.
func TestOpenAPISchemasMatchAnswers(t *testing.T) {
	doc := loadOpenAPI(t)
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result {
		return recipes.Result{Status: recipes.StatusUnreachable, Message: "cannot reach"}
	}))
	a1 := as.ask(as.web, "write", "touch /x", 1)
	a2 := as.ask(as.db, "destructive", "rm -rf /srv", 2)
	// An admin's change, so that the audit log holds a row of kind admin.
	if r := as.call("POST", "/v1/agents", as.root, `{"name": "ci", "keys": ["`+newTestKeyPair(t).Authorized+`"]}`); r.status != 201 {
		t.Fatalf("POST /v1/agents: %d %s", r.status, r.body)
	}
	as.audit(as.web, policy.Read, policy.Allowed, "uptime")
	exit := 0
	if _, err := as.eng.Audit(context.Background(), policy.Record{AgentID: as.agent.ID, AgentName: "bot",
		ConnectionID: as.web.ID, ConnectionAlias: "web", Class: policy.Write, Kind: policy.Exec,
		Outcome: policy.Approved, Deciders: []string{"alice"}, Operation: "touch /x", ExitStatus: &exit}); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		method, route, path, body string
	}{
		{"GET", "/v1/recipes", "/v1/recipes?limit=3", ""},
		{"GET", "/v1/recipes", "/v1/recipes?limit=0", ""},
		{"GET", "/v1/recipes/{key}", "/v1/recipes/github", ""},
		{"GET", "/v1/recipes/{key}", "/v1/recipes/nosuch", ""},
		{"GET", "/v1/agents", "/v1/agents", ""},
		{"GET", "/v1/agents/{id}", "/v1/agents/bot", ""},
		{"GET", "/v1/connections", "/v1/connections", ""},
		{"GET", "/v1/connections/{id}", "/v1/connections/db", ""},
		{"POST", "/v1/connections/{id}/check", "/v1/connections/db/check", ""},
		{"GET", "/v1/grants", "/v1/grants?limit=1", ""},
		{"GET", "/v1/approvals", "/v1/approvals", ""},
		{"GET", "/v1/approvals/{id}", "/v1/approvals/" + a1.ID, ""},
		{"POST", "/v1/approvals/{id}/approve", "/v1/approvals/" + a2.ID + "/approve", ""},
		{"POST", "/v1/approvals/{id}/approve", "/v1/approvals/" + a2.ID + "/approve", ""},
		{"POST", "/v1/approvals/{id}/deny", "/v1/approvals/" + a1.ID + "/deny", `{"reason": "no"}`},
		{"POST", "/v1/approvals/{id}/deny", "/v1/approvals/" + a1.ID + "/deny", ""},
		{"GET", "/v1/audit", "/v1/audit?limit=1", ""},
		{"GET", "/v1/audit", "/v1/audit?kind=admin", ""},
		{"GET", "/v1/connections", "/v1/connections?key_status=unreachable", ""},
		{"GET", "/v1/tokens", "/v1/tokens", ""},
		{"GET", "/v1/admins", "/v1/admins", ""},
		{"GET", "/v1/audit", "/v1/audit", ""},
		{"GET", "/v1/audit/verify", "/v1/audit/verify", ""},
		{"POST", "/v1/locks", "/v1/locks", `{"kind": "agent", "name": "bot", "for": "1h", "reason": "incident"}`},
		{"GET", "/v1/locks", "/v1/locks", ""},
	}
	for _, c := range calls {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := as.call(c.method, c.path, as.ci, c.body)
			op := doc.operation(c.method, c.route)
			resp, _ := op["responses"].(map[string]any)
			spec, ok := resp[strconv.Itoa(r.status)]
			if !ok {
				t.Fatalf("status %d is not documented for %s %s", r.status, c.method, c.route)
			}
			schema := responseSchema(t, doc, spec)
			var body any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			if err := doc.validate(schema, body, "body"); err != nil {
				t.Errorf("answer %d does not match the document: %v\n%s", r.status, err, r.body)
			}
		})
	}
}

// responseSchema is the JSON schema of a documented response.
func responseSchema(t *testing.T, doc openAPI, spec any) any {
	t.Helper()
	m, _ := spec.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		r, err := doc.resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		m, _ = r.(map[string]any)
	}
	content, _ := m["content"].(map[string]any)
	js, _ := content["application/json"].(map[string]any)
	return js["schema"]
}

// validate checks v against the subset of JSON Schema the document uses:
// $ref, type (one or a list), enum, properties with required and
// additionalProperties false, items and oneOf.
func (d openAPI) validate(schema, v any, at string) error {
	s, _ := schema.(map[string]any)
	if ref, ok := s["$ref"].(string); ok {
		r, err := d.resolve(ref)
		if err != nil {
			return err
		}
		return d.validate(r, v, at)
	}
	if alts, ok := s["oneOf"].([]any); ok {
		matched := 0
		for _, alt := range alts {
			if d.validate(alt, v, at) == nil {
				matched++
			}
		}
		if matched != 1 {
			return fmt.Errorf("%s: %v matches %d of oneOf's schemas; want 1", at, v, matched)
		}
		return nil
	}
	if typ, ok := s["type"]; ok {
		var types []string
		switch tt := typ.(type) {
		case string:
			types = []string{tt}
		case []any:
			for _, x := range tt {
				types = append(types, fmt.Sprint(x))
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return jsonType(v, t) }) {
			return fmt.Errorf("%s: %v is not of type %v", at, v, types)
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, name := range req {
			if _, ok := obj[name.(string)]; !ok {
				return fmt.Errorf("%s: required field %s is missing", at, name)
			}
		}
		for name, val := range obj {
			ps, ok := props[name]
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: field %s is not in the document", at, name)
				}
				continue
			}
			if err := d.validate(ps, val, at+"."+name); err != nil {
				return err
			}
		}
	}
	if arr, ok := v.([]any); ok && s["items"] != nil {
		for i, it := range arr {
			if err := d.validate(s["items"], it, at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonType reports whether v (as encoding/json decodes) is of JSON Schema
// type t.
func jsonType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

// TestOpenAPIValidatorCatchesDrift: the validator above refuses an extra
// field, a missing one and a wrong type, so that the schema test above
// cannot pass by accepting anything.
func TestOpenAPIValidatorCatchesDrift(t *testing.T) {
	doc := loadOpenAPI(t)
	good := map[string]any{"id": "agt_1", "name": "bot", "disabled": false, "keys": []any{},
		"created_at": "2026-03-01T12:00:00Z", "modified_at": "2026-03-01T12:00:00Z"}
	agent := map[string]any{"$ref": "#/components/schemas/Agent"}
	if err := doc.validate(agent, good, "agent"); err != nil {
		t.Fatalf("a good agent: %v", err)
	}
	tests := []struct {
		name string
		edit func(map[string]any)
	}{
		{"extra field", func(m map[string]any) { m["secret"] = "x" }},
		{"missing field", func(m map[string]any) { delete(m, "disabled") }},
		{"wrong type", func(m map[string]any) { m["disabled"] = "no" }},
		{"null where not allowed", func(m map[string]any) { m["name"] = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]any{}
			for k, v := range good {
				m[k] = v
			}
			tt.edit(m)
			if err := doc.validate(agent, m, "agent"); err == nil {
				t.Error("validate accepted it; want an error")
			}
		})
	}
	// compareSchema, behind TestOpenAPISchemasMatchGoTypes, notices a Go
	// field the document lacks, a documented field Go lacks and a type
	// that differs.
	type extraField struct {
		model.Agent
		Secret string `json:"secret"`
	}
	type missingField struct {
		ID string `json:"id"`
	}
	type wrongType struct {
		model.Agent
		Disabled string `json:"disabled"`
	}
	for _, gt := range []reflect.Type{reflect.TypeOf(extraField{}), reflect.TypeOf(missingField{}), reflect.TypeOf(wrongType{})} {
		if errs := doc.compareSchema("Agent", gt); len(errs) == 0 {
			t.Errorf("compareSchema(Agent, %s) found nothing; want a difference", gt)
		}
	}
	if errs := doc.compareSchema("Agent", reflect.TypeOf(model.Agent{})); len(errs) != 0 {
		t.Errorf("compareSchema(Agent, model.Agent): %v; want none", errs)
	}
}

// openAPITypes maps each schema of the document that describes a JSON
// object to the Go type the server marshals or reads for it: the shared
// model types for records, the API's own for bodies.
func openAPITypes() map[string]reflect.Type {
	t := func(v any) reflect.Type { return reflect.TypeOf(v) }
	return map[string]reflect.Type{
		"Agent": t(model.Agent{}), "AgentKey": t(model.AgentKey{}), "Connection": t(model.Connection{}), "Recording": t(model.Recording{}), "RecordingEvent": t(model.RecordingEvent{}),
		"HostKey": t(model.HostKey{}), "Grant": t(model.Grant{}), "Approval": t(model.Approval{}),
		"AuditRow": t(model.AuditRow{}), "ChainStatus": t(model.ChainStatus{}), "ChainBreak": t(model.ChainBreak{}),
		"Recipe": t(model.Recipe{}), "RecipeCredentialField": t(recipes.CredentialField{}),
		"NotificationChannel": t(model.Channel{}), "KeyCheck": t(model.KeyCheck{}), "StagedKey": t(model.StagedKey{}),
		"ConnectionResult": t(model.ConnectionResult{}), "Token": t(model.Token{}), "NewToken": t(model.NewToken{}),
		"Admin": t(model.Admin{}), "NotificationTest": t(apiNotifyTest{}), "HeldToken": t(apiHeldToken{}),
		"Error":      t(apiErrorBody{}),
		"DecideBody": t(apiDecideBody{}), "NotificationChannelBody": t(apiNotifyBody{}),
		"NotificationChannelPatch": t(apiNotifyPatch{}), "AgentBody": t(apiAgentBody{}), "AgentPatch": t(apiAgentPatch{}),
		"ConnectionBody": t(apiConnectionBody{}), "ConnectionPatch": t(apiConnectionPatch{}), "PinBody": t(apiPinBody{}),
		"RotateKeyBody": t(apiRotateBody{}), "GrantBody": t(apiGrantBody{}), "TokenBody": t(apiTokenBody{}),
		"AdminBody": t(apiAdminBody{}), "AdminPatch": t(apiAdminPatch{}),
		"ReadSandbox": t(model.ReadSandbox{}), "ReadSandboxProbe": t(model.ReadSandboxProbe{}),
		"Lock": t(model.Lock{}), "LockBody": t(apiLockBody{}),
	}
}

// jsonFields lists a struct's JSON fields as encoding/json sees them:
// embedded structs flattened, "-" left out, and whether each is omitempty.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			maps.Copy(out, jsonFields(f.Type))
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// schemaTypes are the JSON types a property's schema allows, following
// $ref and oneOf.
func (d openAPI) schemaTypes(schema any) []string {
	s, _ := schema.(map[string]any)
	if ref, ok := s["$ref"].(string); ok {
		r, err := d.resolve(ref)
		if err != nil {
			return nil
		}
		return d.schemaTypes(r)
	}
	if alts, ok := s["oneOf"].([]any); ok {
		var out []string
		for _, a := range alts {
			out = append(out, d.schemaTypes(a)...)
		}
		return out
	}
	switch tt := s["type"].(type) {
	case string:
		return []string{tt}
	case []any:
		var out []string
		for _, x := range tt {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// goJSONTypes are the JSON types a Go field's values marshal to.
func goJSONTypes(t reflect.Type) []string {
	if t == reflect.TypeOf(model.Time{}) {
		return []string{"string", "null"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return append(goJSONTypes(t.Elem()), "null")
	case reflect.String:
		return []string{"string"}
	case reflect.Bool:
		return []string{"boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return []string{"integer"}
	case reflect.Float64:
		return []string{"number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json writes []byte as a base64 string (nil: null).
			return []string{"string", "null"}
		}
		return []string{"array"}
	case reflect.Struct, reflect.Map:
		return []string{"object"}
	}
	return []string{t.Kind().String()}
}

// TestOpenAPISchemasMatchGoTypes: every object schema of the document has
// exactly the JSON fields of its Go type, each with the JSON types the Go
// field marshals to, and a record's schema requires every field (the
// server always sends them all). A field added to a model type and not to
// the document, or the other way round, fails here.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	types := openAPITypes()
	for name, sch := range schemas {
		m, _ := sch.(map[string]any)
		props, isObject := m["properties"].(map[string]any)
		_, mapped := types[name]
		if isObject && len(props) > 0 && !mapped && !strings.HasSuffix(name, "Data") && !strings.HasSuffix(name, "List") {
			t.Errorf("schema %s has no Go type in openAPITypes", name)
		}
	}
	for name, gt := range types {
		t.Run(name, func(t *testing.T) {
			for _, e := range doc.compareSchema(name, gt) {
				t.Error(e)
			}
		})
	}
}

// compareSchema lists the differences between the document's schema name
// and Go type gt.
func (d openAPI) compareSchema(name string, gt reflect.Type) []string {
	comps, _ := d["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	m, ok := schemas[name].(map[string]any)
	if !ok {
		return []string{"the document has no schema " + name}
	}
	var errs []string
	props, _ := m["properties"].(map[string]any)
	fields := jsonFields(gt)
	for f := range fields {
		if _, ok := props[f]; !ok {
			errs = append(errs, fmt.Sprintf("%s.%s (Go %s) is not in the document", name, f, gt))
		}
	}
	for p := range props {
		if _, ok := fields[p]; !ok {
			errs = append(errs, fmt.Sprintf("the document's %s.%s is not a field of Go %s", name, p, gt))
		}
	}
	isBody := strings.HasSuffix(name, "Body") || strings.HasSuffix(name, "Patch")
	req, _ := m["required"].([]any)
	for f, sf := range fields {
		if _, ok := props[f]; !ok {
			continue
		}
		documented := d.schemaTypes(props[f])
		for _, jt := range goJSONTypes(sf.Type) {
			if jt == "null" && isBody {
				continue // a body's pointer means "left out", not null
			}
			if !slices.Contains(documented, jt) && !(jt == "integer" && slices.Contains(documented, "number")) {
				errs = append(errs, fmt.Sprintf("%s.%s: Go %s marshals to %s; the document allows %v", name, f, sf.Type, jt, documented))
			}
		}
		omitempty := strings.Contains(sf.Tag.Get("json"), "omitempty")
		if !isBody && !omitempty && !slices.Contains(req, any(f)) {
			errs = append(errs, fmt.Sprintf("%s.%s is always sent; the document does not require it", name, f))
		}
	}
	return errs
}
