package manage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// Staged key rotation (issue 25).
//
// Replacing a connection's key at once broke the target until the new
// public line was installed there, and pooled upstream connections hid the
// breakage for a while. A rotation therefore stages the new key beside the
// current one (StageKey), which changes nothing agents use; a key check
// proves both (CheckConnection); the commit (CommitStagedKey) proves the
// staged key again against the target and only then switches to it (on a
// production connection, once a second admin approves, as any re-key);
// AbortStagedKey drops it. InstallKey does the whole round itself through
// the current key, so that there is never a moment without a working key.

// Rotation results, model.ConnectionResult.Rotation.
const (
	RotationStaged    = "staged"
	RotationCommitted = "committed"
	RotationAborted   = "aborted"
	RotationInstalled = "installed"
)

// RemoteRunner runs a command on a target as a key check connects to it,
// and fails, saying the command's output, unless it exits 0;
// recipes.Checker is one. InstallKey needs the Manager's Checker to be one.
type RemoteRunner interface {
	Run(ctx context.Context, t recipes.Target, signer ssh.Signer, command string) error
}

// StageKey stages a new key for the connection: the given key file, or an
// ed25519 key pair made here when generate is set. Nothing agents use
// changes; a key staged before is replaced. The staging is audited with the
// new key's fingerprint. res.PublicKey is the staged key's public half.
func (m *Manager) StageKey(ctx context.Context, by policy.Actor, alias string, key []byte, generate bool) (ConnectionResult, error) {
	cur, res, err := m.startRotation(ctx, by, alias, RotationStaged)
	if err != nil {
		return res, err
	}
	switch {
	case len(key) > 0 && generate:
		return res, store.Invalidf("connection %s: give a private key or generate one, not both", alias)
	case len(key) == 0 && !generate:
		return res, store.Invalidf("connection %s: give a private key, or generate one", alias)
	}
	oldPub, err := m.currentPublicKey(ctx, cur)
	if err != nil {
		return res, err
	}
	res.PreviousPublicKey = oldPub
	c := candidate{alias: alias, key: key}
	if err := m.prepareKey(&c, &res, generate); err != nil {
		return res, err
	}
	if generate {
		defer clear(c.key)
	}
	staged := res.PublicKey
	if ssh.FingerprintSHA256(staged) == ssh.FingerprintSHA256(oldPub) {
		return res, store.Invalidf("connection %s already uses the key %s; nothing to stage", alias, ssh.FingerprintSHA256(staged))
	}
	what := fmt.Sprintf("conn rotate-key %s: staged key %s beside the current %s", alias, keyText(staged, res.Generated),
		ssh.FingerprintSHA256(oldPub))
	if cur.Staged != nil {
		what += ", replacing the staged " + cur.Staged.Fingerprint()
	}
	aud, p := audited(policy.Change{Actor: by, ConnectionID: cur.ID, ConnectionAlias: alias, What: what})
	conn, err := m.st.StageConnectionKey(ctx, aud, alias, c.key)
	if err != nil {
		return res, err
	}
	res.Conn, res.Stored = conn, true
	res.PublicKey, res.StagedPublicKey = oldPub, staged
	return res, checkAudited(p, "conn rotate-key")
}

// AbortStagedKey drops the key staged for the connection, audited.
func (m *Manager) AbortStagedKey(ctx context.Context, by policy.Actor, alias string) (ConnectionResult, error) {
	cur, res, err := m.startRotation(ctx, by, alias, RotationAborted)
	if err != nil {
		return res, err
	}
	if cur.Staged == nil {
		return res, store.Invalidf("connection %s has no staged key to abort", alias)
	}
	res.StagedPublicKey = cur.Staged.PublicKey
	if pub, err := m.st.ConnectionPublicKey(ctx, cur.ID); err == nil {
		res.PublicKey, res.PreviousPublicKey = pub, pub
	}
	aud, p := audited(policy.Change{Actor: by, ConnectionID: cur.ID, ConnectionAlias: alias,
		What: fmt.Sprintf("conn rotate-key %s: dropped the staged key %s", alias, cur.Staged.Fingerprint())})
	conn, err := m.st.DropStagedKey(ctx, aud, alias)
	if err != nil {
		return res, err
	}
	res.Conn, res.Stored = conn, true
	return res, checkAudited(p, "conn rotate-key --abort")
}

// NotCommittedError says that a commit was refused because the staged key
// was not proved against the target just now.
type NotCommittedError struct {
	Alias  string
	Result recipes.Result
}

func (e *NotCommittedError) Error() string { return "manage: " + e.words() }

// Unwrap is the refusal in the admin's words.
func (e *NotCommittedError) Unwrap() error { return usererr.New(e.words()) }

func (e *NotCommittedError) words() string {
	return fmt.Sprintf("connection %s: the staged key is not proved (%s); nothing was switched: install its line on the target, then commit again",
		e.Alias, CheckText(e.Result))
}

// CommitStagedKey switches the connection to its staged key, after
// proving that key against the target now (the check's outcome is
// recorded with the staged key either way). A production connection's
// commit waits for a second admin (a *HeldError), as any re-key of one
// does; the change request names the staged key, and is made only if that
// key is still the staged one. Pooled upstream clients made with the old
// key retire by themselves when the connection row changes.
func (m *Manager) CommitStagedKey(ctx context.Context, by policy.Actor, alias string, timeout time.Duration) (ConnectionResult, error) {
	cur, res, err := m.startRotation(ctx, by, alias, RotationCommitted)
	if err != nil {
		return res, err
	}
	if cur.Staged == nil {
		return res, store.Invalidf("connection %s has no staged key to commit; stage one with: postern conn rotate-key %s --generate (or --key-file FILE)", alias, alias)
	}
	oldPub, err := m.currentPublicKey(ctx, cur)
	if err != nil {
		return res, err
	}
	res.PreviousPublicKey, res.PublicKey = oldPub, oldPub
	fp, err := m.checkStaged(ctx, cur, &res, timeout)
	if err != nil {
		return res, err
	}
	if res.StagedCheck.Status != recipes.StatusOK {
		return res, &NotCommittedError{Alias: alias, Result: res.StagedCheck}
	}
	check := &store.KeyCheck{Status: store.KeyOK, Message: res.StagedCheck.Message}
	ch := store.ConnectionChange{CommitStaged: fp, Check: check}
	what := fmt.Sprintf("conn rotate-key %s: key %s -> %s (staged, proved)", alias, ssh.FingerprintSHA256(oldPub), fp)
	if cur.Env == store.EnvProduction {
		return res, m.hold(ctx, by, store.ChangeRequest{Kind: changeConnUpdate, Summary: what,
			Before: connText(cur) + " key " + ssh.FingerprintSHA256(oldPub), After: connText(cur) + " key " + fp,
			ConnectionID: cur.ID, ConnectionAlias: cur.Alias},
			heldChange{ConnUpdate: &ch})
	}
	aud, p := audited(policy.Change{Actor: by, ConnectionID: cur.ID, ConnectionAlias: alias, What: what,
		Result: model.StatusText(string(store.KeyOK), res.StagedCheck.Message, false)})
	conn, err := m.st.UpdateConnection(ctx, aud, alias, ch)
	if err != nil {
		return res, err
	}
	res.Conn, res.Stored = conn, true
	res.PublicKey = res.StagedPublicKey
	return res, checkAudited(p, "conn rotate-key --commit")
}

// checkStaged proves the staged key of cur against the target and records
// the outcome with it: res.StagedCheck. It answers the staged key's
// fingerprint.
func (m *Manager) checkStaged(ctx context.Context, cur *store.Connection, res *ConnectionResult, timeout time.Duration) (string, error) {
	signer, err := m.st.StagedSigner(ctx, cur.ID)
	if err != nil {
		return "", err
	}
	fp := ssh.FingerprintSHA256(signer.PublicKey())
	res.StagedPublicKey = signer.PublicKey()
	c := connCandidate(cur, signer)
	var sub ConnectionResult
	if err := m.runCheck(ctx, &c, &sub, timeout); err != nil {
		return "", err
	}
	res.StagedChecked, res.StagedCheck = true, sub.Check
	conn, err := m.st.SetStagedKeyStatus(ctx, cur.Alias, fp, KeyStatusOf(sub.Check.Status), sub.Check.Message)
	if err != nil {
		return "", fmt.Errorf("manage: check of the staged key of %s: %s, not recorded: %w", cur.Alias, sub.Check.Status, err)
	}
	res.Conn = conn
	return fp, nil
}

// InstallKey rotates the connection's key in one command, through the
// current key: it proves the current key, stages a generated key, appends
// its public line to the target user's ~/.ssh/authorized_keys (once),
// proves it, commits it, and then removes the old key's line there. Each
// step's failure stops it with the connection still on a working key: the
// staged key stays staged (and its line, if appended, in place) for a
// commit or an abort. If the old line cannot be removed the rotation
// stands and res.Steps says so. A production connection's commit waits
// for a second admin (a *HeldError), and the old line stays.
func (m *Manager) InstallKey(ctx context.Context, by policy.Actor, alias string, timeout time.Duration) (ConnectionResult, error) {
	cur, res, err := m.startRotation(ctx, by, alias, "")
	if err != nil {
		return res, err
	}
	runner, ok := m.checker(timeout).(RemoteRunner)
	if !ok {
		return res, store.Invalidf("connection %s: this postern cannot run commands on targets (its key checker is not an SSH client); install the line yourself", alias)
	}
	if err := m.st.CheckMasterKey(); err != nil {
		return res, err
	}
	oldSigner, err := m.st.ConnectionSigner(ctx, cur.ID)
	if err != nil {
		return res, err
	}
	step := func(s string) { res.Steps = append(res.Steps, s) }
	// 1. The current key must work: it is the way in.
	c := connCandidate(cur, oldSigner)
	if err := m.runCheck(ctx, &c, &res, timeout); err != nil {
		return res, err
	}
	if res.Check.Status != recipes.StatusOK {
		return res, usererr.New(fmt.Sprintf("connection %s: --install needs the current key to work, and its check says %s; nothing was changed",
			alias, CheckText(res.Check)))
	}
	step("current key " + ssh.FingerprintSHA256(oldSigner.PublicKey()) + " works")
	// 2. Stage a generated key.
	staged, err := m.StageKey(ctx, by, alias, nil, true)
	if err != nil {
		return res, err
	}
	res.Conn, res.Stored, res.Generated = staged.Conn, true, true
	res.PublicKey, res.PreviousPublicKey, res.StagedPublicKey = staged.PublicKey, staged.PreviousPublicKey, staged.StagedPublicKey
	res.Rotation = RotationStaged
	newFP := ssh.FingerprintSHA256(staged.StagedPublicKey)
	step("staged a generated key " + newFP)
	target, err := m.remoteTarget(cur)
	if err != nil {
		return res, err
	}
	// 3. Append its line through the current key.
	line := model.AuthorizedKeyLine(staged.StagedPublicKey, alias)
	if err := runner.Run(ctx, target, oldSigner, appendKeyCommand(staged.StagedPublicKey, line)); err != nil {
		return res, usererr.New(fmt.Sprintf("connection %s: could not add the new line to ~/.ssh/authorized_keys on the target: %v; the key stays staged, the current key in use",
			alias, err))
	}
	step("added the new key's line to ~/.ssh/authorized_keys")
	// 4. Prove and commit it.
	committed, err := m.CommitStagedKey(ctx, by, alias, timeout)
	res.StagedChecked, res.StagedCheck = committed.StagedChecked, committed.StagedCheck
	if committed.Conn != nil {
		res.Conn = committed.Conn
	}
	var held *HeldError
	if errors.As(err, &held) {
		step("the switch waits for a second admin: the old key's line stays until it is made")
		return res, err
	}
	if err != nil {
		return res, err
	}
	res.Rotation, res.Stored = RotationInstalled, true
	res.PublicKey = staged.StagedPublicKey
	res.Checked, res.Check = true, committed.StagedCheck
	step("proved the new key and switched to it")
	// 5. Remove the old line, through the old key, which the target still
	// accepts until its line is gone.
	if err := runner.Run(ctx, target, oldSigner, removeKeyCommand(oldSigner.PublicKey())); err != nil {
		step(fmt.Sprintf("could not remove the old key's line (%v); it is still in authorized_keys: remove the line with %s yourself",
			err, ssh.FingerprintSHA256(oldSigner.PublicKey())))
		return res, nil
	}
	step("removed the old key's line " + ssh.FingerprintSHA256(oldSigner.PublicKey()) + " from ~/.ssh/authorized_keys")
	return res, nil
}

// startRotation is the opening every rotation step shares: by must be
// allowed to change configuration, and res starts from the connection as
// it stands, with rotation (Rotation*, "" until InstallKey staged).
func (m *Manager) startRotation(ctx context.Context, by policy.Actor, alias, rotation string) (*store.Connection, ConnectionResult, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, ConnectionResult{}, err
	}
	cur, err := m.st.ConnectionByAlias(ctx, alias)
	if err != nil {
		return nil, ConnectionResult{}, err
	}
	return cur, ConnectionResult{Previous: cur, Conn: cur, Rotation: rotation}, nil
}

// currentPublicKey is the public half of cur's current key, once the
// master key is known to open it: a stage and a commit both name it.
func (m *Manager) currentPublicKey(ctx context.Context, cur *store.Connection) (ssh.PublicKey, error) {
	if err := m.st.CheckMasterKey(); err != nil {
		return nil, err
	}
	return m.st.ConnectionPublicKey(ctx, cur.ID)
}

// remoteTarget is cur as a target to run a command on, accepting only its
// pins.
func (m *Manager) remoteTarget(cur *store.Connection) (recipes.Target, error) {
	hostKeys, err := cur.HostKeyCallback()
	if err != nil {
		return recipes.Target{}, err
	}
	return recipes.Target{Name: cur.Alias, Addr: cur.Addr(), User: cur.User, HostKeys: hostKeys}, nil
}

// keyBlob is the base64 field of pub's authorized_keys line: what
// identifies a key in the file whatever its options and comment.
func keyBlob(pub ssh.PublicKey) string {
	f := strings.Fields(string(ssh.MarshalAuthorizedKey(pub)))
	return f[1]
}

// appendKeyCommand adds line to ~/.ssh/authorized_keys unless a line with
// pub's key is there already, creating the directory and file private
// (umask 077), and ending a last line that has no newline first. The line
// and blob are base64 and a connection alias (a checked name): nothing in
// them needs quoting beyond single quotes.
func appendKeyCommand(pub ssh.PublicKey, line string) string {
	return `umask 077 && mkdir -p ~/.ssh && f=~/.ssh/authorized_keys && touch "$f" && ` +
		`if awk -v b='` + keyBlob(pub) + `' '{for(i=1;i<=NF;i++) if($i==b) found=1} END{exit !found}' "$f"; then exit 0; fi && ` +
		`if [ -s "$f" ] && [ -n "$(tail -c 1 "$f")" ]; then echo >> "$f"; fi && ` +
		`printf '%s\n' '` + line + `' >> "$f"`
}

// removeKeyCommand removes from ~/.ssh/authorized_keys the lines that
// carry pub's key (as a whole field), and no other: the other lines are
// written back as they were, into the same file (its mode and owner stay).
// It fails, changing nothing and leaving no temporary file, when no line
// carries it or the lines cannot be read (no awk, say).
func removeKeyCommand(pub ssh.PublicKey) string {
	return `umask 077 && f=~/.ssh/authorized_keys && t="$f.postern-$$" && ` +
		`{ awk -v b='` + keyBlob(pub) + `' '{for(i=1;i<=NF;i++) if($i==b) next} {print}' "$f" > "$t" || { rm -f "$t"; exit 1; }; } && ` +
		`if cmp -s "$f" "$t"; then rm -f "$t"; echo "no line with the key"; exit 1; fi && ` +
		`cat "$t" > "$f" && rm -f "$t"`
}
