package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// rowsSource is an AuditSource over rows in memory.
type rowsSource []store.AuditRow

func (s rowsSource) ScanAudit(_ context.Context, fn func(store.AuditRow) error) error {
	for _, r := range s {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// chainOf is n rows chained as AppendAudit chains them.
func chainOf(n int) rowsSource {
	prev := make([]byte, sha256.Size)
	var rows rowsSource
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		r := store.AuditRow{Seq: int64(i), Time: start.Add(time.Duration(i) * time.Minute), AgentName: "bot",
			Kind: "exec", Decision: "allowed", Operation: "uptime", ChainVersion: chainCurrent}
		r.Hash = ChainHash(prev, &r)
		prev = r.Hash
		rows = append(rows, r)
	}
	return rows
}

func headOf(rows rowsSource, seq int64) Head {
	return Head{Seq: seq, Hash: rows[seq-1].Hash}
}

func TestParseHead(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	zeros := strings.Repeat("00", 32)
	tests := []struct {
		name, in string
		want     string // the head as String writes it; "" for an error
		errText  string // in the error when want is ""
	}{
		{"head", "12:" + hash, "12:" + hash, ""},
		{"upper case hex", "12:" + strings.ToUpper(hash), "12:" + hash, ""},
		{"empty log", "0:" + zeros, "0:" + zeros, ""},
		{"no colon", "12" + hash, "", "no colon"},
		{"negative seq", "-1:" + hash, "", "sequence number"},
		{"seq not a number", "x:" + hash, "", "sequence number"},
		{"short hash", "12:abcd", "", "64 hex digits"},
		{"not hex", "12:" + strings.Repeat("zz", 32), "", "64 hex digits"},
		{"seq 0 with a hash", "0:" + hash, "", "all zeros"},
		{"empty", "", "", "no colon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHead(tt.in)
			switch {
			case tt.want != "" && err != nil:
				t.Fatalf("ParseHead(%q): got error %v; want %s", tt.in, err, tt.want)
			case tt.want != "" && h.String() != tt.want:
				t.Errorf("ParseHead(%q): got %s; want %s", tt.in, h, tt.want)
			case tt.want == "" && err == nil:
				t.Errorf("ParseHead(%q): got %s, no error; want an error saying %q", tt.in, h, tt.errText)
			case tt.want == "" && !strings.Contains(err.Error(), tt.errText):
				t.Errorf("ParseHead(%q): got error %q; want one saying %q", tt.in, err, tt.errText)
			}
		})
	}
}

// TestVerifyFrom: a kept head proves the rows up to it are there,
// unchanged; rows missing from the end are counted, and a row at the kept
// seq with another hash breaks the chain there.
func TestVerifyFrom(t *testing.T) {
	five := chainOf(5)
	other := chainOf(7) // the same seqs with another operation: other hashes
	for i := range other {
		other[i].Operation = "hostname"
		prev := make([]byte, sha256.Size)
		if i > 0 {
			prev = other[i-1].Hash
		}
		other[i].Hash = ChainHash(prev, &other[i])
	}
	edited := chainOf(5)
	edited[1].Operation = "rm -rf /"
	tests := []struct {
		name      string
		src       rowsSource
		kept      Head
		wantRows  int64
		wantLost  int64
		wantBreak int64 // seq of the break; 0 for none
		breakText string
	}{
		{"kept head is the newest row", five, headOf(five, 5), 5, 0, 0, ""},
		{"rows added after the kept head", five, headOf(five, 3), 5, 0, 0, ""},
		{"newest rows removed", five[:3], headOf(five, 5), 3, 2, 0, ""},
		{"every row removed", nil, headOf(five, 5), 0, 5, 0, ""},
		{"empty log kept, rows added", five, Head{Seq: 0, Hash: make([]byte, sha256.Size)}, 5, 0, 0, ""},
		{"rows replaced with a recomputed chain", other, headOf(five, 5), 5, 0, 5, "kept head says"},
		{"an edited row before the kept head", edited, headOf(five, 5), 2, 0, 2, "hash does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := VerifyFrom(context.Background(), tt.src, tt.kept)
			if err != nil {
				t.Fatalf("VerifyFrom: %v", err)
			}
			if res.Rows != tt.wantRows || res.Lost != tt.wantLost {
				t.Errorf("got %d rows, %d lost; want %d rows, %d lost", res.Rows, res.Lost, tt.wantRows, tt.wantLost)
			}
			switch {
			case tt.wantBreak == 0 && res.Broken != nil:
				t.Errorf("got a break at %s; want none", res.Broken)
			case tt.wantBreak != 0 && res.Broken == nil:
				t.Errorf("got no break; want one at row %d", tt.wantBreak)
			case tt.wantBreak != 0 && (res.Broken.Seq != tt.wantBreak || !strings.Contains(res.Broken.Reason, tt.breakText)):
				t.Errorf("got a break at %s; want one at row %d saying %q", res.Broken, tt.wantBreak, tt.breakText)
			}
			// Without the kept head the same log is judged as Verify
			// judges it: truncation and a replaced tail go unseen.
			plain, err := Verify(context.Background(), tt.src)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if plain.Lost != 0 {
				t.Errorf("Verify: got %d lost; want 0 (only VerifyFrom counts them)", plain.Lost)
			}
			if tt.breakText == "kept head says" && plain.Broken != nil {
				t.Errorf("Verify of a consistently rewritten chain: got a break at %s; want none", plain.Broken)
			}
		})
	}
}

// TestHeadString: a head is written SEQ:HASHHEX, which ParseHead reads
// back.
func TestHeadString(t *testing.T) {
	h := headOf(chainOf(3), 3)
	back, err := ParseHead(h.String())
	if err != nil || back.Seq != h.Seq || !bytes.Equal(back.Hash, h.Hash) {
		t.Errorf("ParseHead(%s): got %v, %v; want the same head", h, back, err)
	}
}
