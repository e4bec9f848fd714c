package shellclass

import (
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/postern/postern/internal/e2e"
)

// TestTablesParse reads every option table: a malformed token panics at
// run time (recovered as a destructive "classifier failed"), and an
// option listed twice with different meanings is a table error.
func TestTablesParse(t *testing.T) {
	for _, tab := range specTables() {
		name := tab.name
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("table %s: %v", name, r)
				}
			}()
			seen := map[string]string{}
			for _, tok := range strings.Fields(tab.opts) {
				base := tok
				if i := strings.IndexByte(base, ':'); i == 1 {
					base = base[2:]
				}
				base = strings.TrimRight(base, "=?")
				if prev, dup := seen[base]; dup && prev != tok {
					t.Errorf("table %s lists %s twice: %q and %q", name, base, prev, tok)
				}
				seen[base] = tok
			}
			parseSpec(tab.family, tab.opts)
		}()
	}
}

// helpOption finds the long options a --help text names.
var helpOption = regexp.MustCompile(`(?:^|[\s,\[])(--[a-z0-9][a-z0-9-]*[a-z0-9])`)

// TestTablesKnowEveryHelpOption runs `TOOL --help` of every getopt_long read
// entry that is installed and checks that the entry's table knows every
// long option the help names, read or not: an abbreviation is resolved
// against the table, and an option the table does not know could be the
// one the tool picks. A tool not installed is skipped, unless POSTERN_E2E
// is set (CI installs them).
func TestTablesKnowEveryHelpOption(t *testing.T) {
	// Options the help texts name that are not options of the tool
	// itself (examples, other programs, placeholders).
	notOptions := map[string]bool{"--help": false, "--version": false}
	// Tools whose help is not theirs or that print no option list.
	skip := map[string]bool{"echo": true, "printf": true, "true": true, "false": true, "test": true, "[": true,
		"pwd": true, "type": true, "which": true, "expr": true, "nslookup": true, "dig": true, "host": true,
		"ping": true, "lsof": true, "ps": true, "rg": true, "xxd": true, "jq": true, "tree": true, "iostat": true,
		"lspci": true, "arch": true, "groups": true, "sleep": true}
	names := make([]string, 0, len(readTable))
	for n := range readTable {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		e := readTable[name]
		if skip[name] || e.family != gnuFamily {
			continue
		}
		path, err := exec.LookPath(name)
		if err != nil {
			if e2e.Enabled() {
				t.Errorf("%s is not installed; CI installs every read entry's tool", name)
			}
			continue
		}
		out, _ := exec.Command(path, "--help").CombinedOutput()
		sp := specOf(e.family, e.opts)
		for _, m := range helpOption.FindAllStringSubmatch(string(out), -1) {
			opt := m[1][2:]
			if _, known := notOptions[m[1]]; known {
				continue
			}
			if _, ok := sp.long[opt]; !ok {
				t.Errorf("%s --help names %s, which the table of %s does not know (add it, marked with what it does)", name, m[1], name)
			}
		}
	}
}
