package web

import (
	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// readSandboxFlash is what a connection form's answer says of the read
// sandbox: what a probe that ran found, and the warning of a production
// connection whose reads rely on the classifier alone. The table shows the
// rest.
func readSandboxFlash(res manage.ConnectionResult) []string {
	var parts []string
	if res.Probed && res.Probe.Found != store.SandboxUnprobed {
		p := "Read sandbox: " + string(res.Probe.Found)
		if res.Probe.Found == store.SandboxNone && res.Probe.Message != "" {
			p += " (" + res.Probe.Message + ")"
		}
		parts = append(parts, p+".")
	}
	if res.Conn != nil && res.Stored {
		if w := model.ReadSandboxOf(*res.Conn).Warning; w != "" {
			parts = append(parts, "Warning: "+w+".")
		}
	}
	return parts
}
