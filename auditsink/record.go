package auditsink

import (
	"encoding/json"
	"fmt"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Record is one row as every sink ships it: a JSON object on one line (JSON
// escapes any newline inside), the very shape of `postern audit export -o
// jsonl` and GET /v1/audit (model.AuditRow), so that a field added to the
// row for the CLI and the API is shipped too, with no line here, and a
// collector parses the sink's rows and an export's alike. Nothing secret
// is in it: the operation and the agent's reason are redacted where the
// row is written (policy/redact.go), and the hash is the row's chain hash,
// which proves the log's order and hides nothing.
func Record(r *store.AuditRow) ([]byte, error) {
	b, err := json.Marshal(model.AuditRowOf(*r))
	if err != nil {
		return nil, fmt.Errorf("auditsink: encode row %d: %w", r.Seq, err)
	}
	return b, nil
}
