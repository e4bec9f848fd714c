package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"

	"github.com/postern/postern/store"
)

// The audit hash chain.
//
// Each row's hash is
//
//	SHA-256( field("postern-audit-v1") || field(prev) || field(seq) ||
//	         field(time) || field(agent_id) || field(agent_name) ||
//	         field(connection_id) || field(connection_alias) || field(class) ||
//	         field(kind) || field(decision) || field(reason) ||
//	         field(approval_id) || field(len(deciders)) || field(decider)... ||
//	         field(operation) || field(exit_status) || field(duration_ns) ||
//	         field(bytes_in) || field(bytes_out) )
//
// for a row of chain version 1. A row of version 2 (every row written since
// schema 0006) starts with field("postern-audit-v2") instead and ends with
// two more fields, after bytes_out:
//
//	... || field(agent_reason) || field(source_addr) )
//
// A row of version 3 (every row written since schema 0015) starts with
// field("postern-audit-v3") and ends with one more field, after
// source_addr:
//
//	... || field(agent_reason) || field(source_addr) || field(session_id) )
//
// A row's chain_version column says which encoding its hash covers; a row
// with a field set that its version's encoding lacks does not verify (a
// version 1 row with agent_reason or source_addr, a version 1 or 2 row
// with session_id), so that the fields cannot be added to an old row
// unnoticed, and changing a row's version changes what its hash must be.
//
// field(x) is the length of x as a 4-byte big-endian unsigned integer
// followed by the bytes of x. Integers are written in decimal (exit_status is
// the empty string when there is none), time as RFC 3339 in UTC with exactly
// nine fractional digits, prev is the previous row's 32-byte hash and 32 zero
// bytes for the first row. Length prefixes make the encoding unambiguous: no
// two different rows encode to the same bytes, whatever the fields contain.
//
// seq (1, 2, 3, ... with no gaps) is inside the hashed data, so besides an
// edited row, a deleted row (a gap, and a row whose prev no longer matches)
// and a reordered row (a seq that no longer matches its contents) are caught.
// Removing rows from the end cannot be caught by the chain alone; Verify
// returns the head hash so that it can be kept somewhere else, and
// VerifyFrom holds the log to such a kept Head.

// The versions of the hashed encoding, each with the label that starts it.
// A new encoding gets a new version; rows keep the one they were written
// with.
const (
	chainV1      = 1
	chainV2      = 2
	chainV3      = 3
	chainCurrent = chainV3
)

func chainLabel(version int) string { return "postern-audit-v" + strconv.Itoa(version) }

// chainTimeLayout is the time format inside the hashed data.
const chainTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// ChainHash computes a row's hash from the previous row's hash. It is the
// store.ChainFunc that Engine.Audit passes to store.AppendAudit.
func ChainHash(prev []byte, row *store.AuditRow) []byte {
	h := sha256.New()
	var n [4]byte
	field := func(h hash.Hash, b []byte) {
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	str := func(s string) { field(h, []byte(s)) }
	num := func(i int64) { str(strconv.FormatInt(i, 10)) }
	version := row.ChainVersion
	if version == 0 {
		version = chainV1
	}
	str(chainLabel(version))
	field(h, prev)
	num(row.Seq)
	str(row.Time.UTC().Format(chainTimeLayout))
	str(row.AgentID)
	str(row.AgentName)
	str(row.ConnectionID)
	str(row.ConnectionAlias)
	str(row.Class)
	str(row.Kind)
	str(row.Decision)
	str(row.Reason)
	str(row.ApprovalID)
	num(int64(len(row.Deciders)))
	for _, d := range row.Deciders {
		str(d)
	}
	str(row.Operation)
	if row.ExitStatus != nil {
		num(int64(*row.ExitStatus))
	} else {
		str("")
	}
	num(int64(row.Duration / time.Nanosecond))
	num(row.BytesIn)
	num(row.BytesOut)
	if version >= chainV2 {
		str(row.AgentReason)
		str(row.SourceAddr)
	}
	if version >= chainV3 {
		str(row.SessionID)
	}
	return h.Sum(nil)
}

// AuditSource is what Verify reads; *store.Store implements it.
type AuditSource interface {
	ScanAudit(ctx context.Context, fn func(store.AuditRow) error) error
}

// VerifyResult is the outcome of Verify.
type VerifyResult struct {
	Rows int64  // rows checked (up to and including a broken one)
	Head string // hex hash of the last intact row; keep it elsewhere to catch truncation
	// Broken is nil when the chain is intact, else the first row where it
	// breaks.
	Broken *ChainBreak
	// Lost is, for VerifyFrom over an intact chain, how many rows the log
	// lacks at its end: the kept head's seq less the newest row's. Zero
	// when the kept head's row is there.
	Lost int64
}

// Head names an audit row by its seq and hash, written SEQ:HASHHEX (as
// `postern audit head` prints it and serve publishes it). The chain proves
// the order of the rows it has, not that none were removed from its end;
// a head kept outside the database is what VerifyFrom needs to prove that.
type Head struct {
	Seq  int64
	Hash []byte // SHA-256; 32 zero bytes for seq 0, the empty log
}

func (h Head) String() string {
	return strconv.FormatInt(h.Seq, 10) + ":" + hex.EncodeToString(h.Hash)
}

// ParseHead reads a head written SEQ:HASHHEX. Seq 0 stands for the empty
// log, whose hash is 64 zeros (what the first row chains from).
func ParseHead(s string) (Head, error) {
	seqText, hashText, ok := strings.Cut(s, ":")
	bad := func(why string) (Head, error) {
		return Head{}, fmt.Errorf("policy: audit head %q: %s; want SEQ:HASH as `postern audit head` prints it", s, why)
	}
	if !ok {
		return bad("no colon")
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 0 {
		return bad("the sequence number is not a whole number of 0 or more")
	}
	hash, err := hex.DecodeString(hashText)
	if err != nil || len(hash) != sha256.Size {
		return bad(fmt.Sprintf("the hash is not %d hex digits", 2*sha256.Size))
	}
	if seq == 0 && !bytes.Equal(hash, make([]byte, sha256.Size)) {
		return bad("seq 0 is the empty log, whose hash is all zeros")
	}
	return Head{Seq: seq, Hash: hash}, nil
}

// ChainBreak locates the first row where the audit chain breaks.
type ChainBreak struct {
	Seq      int64 // the row's stored seq
	Position int64 // its 1-based position in seq order
	Reason   string
}

func (b *ChainBreak) String() string {
	return fmt.Sprintf("row %d (position %d): %s", b.Seq, b.Position, b.Reason)
}

// errStop ends a scan early once the chain is known to be broken.
var errStop = errors.New("stop")

// Verify walks the audit log in seq order, recomputing every hash, and
// reports the first row where the chain breaks. An error means the log could
// not be read, not that it was tampered with.
func Verify(ctx context.Context, src AuditSource) (VerifyResult, error) {
	return verify(ctx, src, nil)
}

// VerifyFrom is Verify that also holds the log to a head kept elsewhere:
// the row at kept.Seq must be there with kept.Hash as its hash, else the
// chain breaks at that row (the rows up to it were rewritten and their
// chain recomputed, or rows from it on were removed and others appended in
// their place). When the chain is intact but ends before kept.Seq, Lost
// counts the rows missing from its end.
func VerifyFrom(ctx context.Context, src AuditSource, kept Head) (VerifyResult, error) {
	res, err := verify(ctx, src, &kept)
	if err == nil && res.Broken == nil && res.Rows < kept.Seq {
		res.Lost = kept.Seq - res.Rows
	}
	return res, err
}

// verify is Verify, holding the row at kept.Seq to kept.Hash when kept is
// not nil.
func verify(ctx context.Context, src AuditSource, kept *Head) (VerifyResult, error) {
	var res VerifyResult
	prev := make([]byte, sha256.Size)
	err := src.ScanAudit(ctx, func(row store.AuditRow) error {
		res.Rows++
		brk := func(reason string) error {
			res.Broken = &ChainBreak{Seq: row.Seq, Position: res.Rows, Reason: reason}
			return errStop
		}
		if row.Seq != res.Rows {
			return brk(fmt.Sprintf("sequence number is %d; want %d: a row before it was deleted or the rows were reordered", row.Seq, res.Rows))
		}
		switch {
		case row.ChainVersion < chainV1 || row.ChainVersion > chainCurrent:
			return brk(fmt.Sprintf("chain version %d is unknown", row.ChainVersion))
		case row.ChainVersion == chainV1 && (row.AgentReason != "" || row.SourceAddr != ""):
			return brk("a version 1 row carries fields its hash does not cover: they were added after it was written")
		case row.ChainVersion < chainV3 && row.SessionID != "":
			return brk(fmt.Sprintf("a version %d row carries a session id its hash does not cover: it was added after the row was written", row.ChainVersion))
		}
		want := ChainHash(prev, &row)
		if !bytes.Equal(want, row.Hash) {
			return brk("hash does not match the row and the one before it: the row was edited, or rows were deleted or reordered")
		}
		if kept != nil && row.Seq == kept.Seq && !bytes.Equal(want, kept.Hash) {
			return brk(fmt.Sprintf("hash is %x; the kept head says %x: rows up to here were rewritten, or rows from here on were removed and others written in their place", want, kept.Hash))
		}
		prev = want
		return nil
	})
	res.Head = hex.EncodeToString(prev)
	if err != nil && !errors.Is(err, errStop) {
		return res, fmt.Errorf("policy: verify audit: %w", err)
	}
	return res, nil
}
