package readsandbox

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// marker starts every line of the probe's own output, so that ParseProbe
// can tell it from what the mechanisms print.
const marker = "#postern-probe"

// Attempt is what a probe found of one mechanism.
type Attempt struct {
	Mechanism Mechanism
	// OK: the mechanism ran `true` read-only (a write inside failed).
	OK bool
	// Why says why it does not work, in the target's words where it gave
	// any ("bwrap: not installed", unshare's error); "" when OK.
	Why string
}

// Result is what a probe found: the first mechanism that works, if any,
// and each mechanism it tried.
type Result struct {
	Found Mechanism // "" when none works
	Tried []Attempt
}

// Summary says what was found in one line for the admin: the mechanism,
// or why each one failed.
func (r Result) Summary() string {
	var parts []string
	for _, a := range r.Tried {
		if a.OK {
			parts = append(parts, string(a.Mechanism)+": works")
			continue
		}
		parts = append(parts, string(a.Mechanism)+": "+a.Why)
	}
	return strings.Join(parts, "; ")
}

// maxWhy bounds what is kept of a mechanism's message.
const maxWhy = 300

// Probe returns the command that finds which mechanism works on a target:
// the target's login shell runs, for each mechanism in Mechanisms' order
// until one works, `true` wrapped by Wrap with a check inside first:
// remounting / read-write and creating a file in /tmp and in $HOME must
// fail. The file's name
// holds token (letters and digits, from the caller's random source), so
// that the probe can also look for it from outside the sandbox, and remove
// it: a file that appears means the sandbox did not hold. ParseProbe reads
// the output, stdout and stderr together.
func Probe(token string) (string, error) {
	if token == "" || strings.Trim(token, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", fmt.Errorf("readsandbox: probe token %q: want letters and digits", token)
	}
	files := `/tmp/.postern-probe-` + token + ` "$HOME/.postern-probe-` + token + `"`
	inside := `mount -o remount,rw / >/dev/null 2>&1 && { echo '` + marker + `-remounted'; exit 3; }; ` +
		`for p in ` + files + `; do : 2>/dev/null >"$p" && { echo '` + marker + `-wrote'; exit 3; }; done; exit 0`
	// found is set once a mechanism worked: the next ones are not tried.
	b := strings.Builder{}
	b.WriteString("found=; ")
	for _, m := range Mechanisms() {
		w, err := Wrap(m, inside)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "if [ -z \"$found\" ]; then echo '%s %s'; ", marker, m)
		fmt.Fprintf(&b, "if command -v %s >/dev/null 2>&1; then ( %s ) 2>&1; st=$?; echo \"%s-status $st\"; ", m, w, marker)
		fmt.Fprintf(&b, "else st=missing; echo '%s-status missing'; fi; [ \"$st\" = 0 ] && found=%s; ", marker, m)
		fmt.Fprintf(&b, `for p in %s; do if [ -e "$p" ]; then rm -f "$p"; found=; echo '%s-wrote'; fi; done; fi; `, files, marker)
	}
	fmt.Fprintf(&b, "echo '%s-done'", marker)
	return b.String(), nil
}

// ParseProbe reads the output of Probe's command (stdout and stderr
// together) and says which mechanism works. Output cut short, or from a
// login shell that did not run the probe, finds none, saying so.
func ParseProbe(out string) Result {
	var res Result
	var cur *Attempt
	var text []string
	status := ""
	wrote := false
	finish := func() {
		if cur == nil {
			return
		}
		cur.OK, cur.Why = judge(cur.Mechanism, status, wrote, text)
		res.Tried = append(res.Tried, *cur)
		cur, text, status, wrote = nil, nil, "", false
	}
	done := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, marker+" "):
			finish()
			// Only the sections the probe writes; a name it does not
			// know is ignored with what follows it.
			if m := Mechanism(strings.TrimPrefix(line, marker+" ")); slices.Contains(Mechanisms(), m) {
				cur = &Attempt{Mechanism: m}
			}
		case strings.HasPrefix(line, marker+"-status "):
			status = strings.TrimPrefix(line, marker+"-status ")
		case line == marker+"-wrote" || line == marker+"-remounted":
			wrote = true
		case line == marker+"-done":
			done = true
		default:
			if cur != nil && status == "" && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "postern: ") {
				text = append(text, strings.TrimSpace(line))
			}
		}
	}
	finish()
	if !done {
		// The probe did not finish: nothing it found can be trusted.
		why := "the probe did not finish"
		if len(res.Tried) == 0 {
			why = "the probe did not run (is the login shell bash or a POSIX sh?)"
		}
		return Result{Tried: []Attempt{{Mechanism: "probe", Why: why + ": " + oneLine(out)}}}
	}
	for _, a := range res.Tried {
		if a.OK {
			res.Found = a.Mechanism
			break
		}
	}
	return res
}

// judge is the verdict on one mechanism from its exit status, whether a
// write went through, and what it printed.
func judge(m Mechanism, status string, wrote bool, text []string) (bool, string) {
	msg := oneLine(strings.Join(text, "; "))
	switch {
	case wrote:
		return false, "a write inside the sandbox went through: it is not read-only"
	case status == "missing":
		return false, "not installed (not on the PATH of the target user's login shell)"
	case status == "0":
		return true, ""
	case status == strconv.Itoa(ExitFailed):
		if msg == "" {
			msg = "no message"
		}
		return false, "did not start: " + msg
	case status == "":
		return false, "the probe ended before " + string(m) + " did"
	}
	if msg != "" {
		msg = ": " + msg
	}
	return false, "the probe exited with status " + status + msg
}

// oneLine folds s to one trimmed line of at most maxWhy bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxWhy {
		s = s[:maxWhy] + "…"
	}
	return s
}
