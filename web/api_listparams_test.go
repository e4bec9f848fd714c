package web

import (
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIListParams: each list takes exactly the query parameters the
// document gives it, no more (a filter the spec takes but no code reads
// is ignored silently: the client thinks it filtered) and no fewer.
func TestOpenAPIListParams(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, tt := range []struct {
		path string
		spec apiListSpec
	}{
		{"/v1/recipes", apiRecipeList()}, {"/v1/agents", apiAgentList()}, {"/v1/connections", apiConnectionList()},
		{"/v1/grants", apiGrantList()}, {"/v1/approvals", apiApprovalList()}, {"/v1/notifications", apiNotifyList()},
		{"/v1/audit", apiAuditList()}, {"/v1/tokens", apiTokenList()}, {"/v1/admins", apiAdminList()},
		{"/v1/recordings", apiRecordingList()}, {"/v1/locks", apiLockList()},
	} {
		t.Run(tt.path, func(t *testing.T) {
			op := doc.operation("GET", tt.path)
			if op == nil {
				t.Fatalf("GET %s is not documented", tt.path)
			}
			params, _ := op["parameters"].([]any)
			var documented []string
			for _, p := range params {
				m, _ := p.(map[string]any)
				if ref, ok := m["$ref"].(string); ok {
					r, err := doc.resolve(ref)
					if err != nil {
						t.Fatal(err)
					}
					m, _ = r.(map[string]any)
				}
				if m["in"] == "query" {
					documented = append(documented, m["name"].(string))
				}
			}
			slices.Sort(documented)
			taken := slices.Sorted(slices.Values(tt.spec.params()))
			if !slices.Equal(documented, taken) {
				t.Errorf("documented %s; the list takes %s", strings.Join(documented, ","), strings.Join(taken, ","))
			}
		})
	}
}
