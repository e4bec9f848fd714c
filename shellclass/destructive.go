package shellclass

import "strings"

// destructiveMatch reports whether base with args is destructive by the
// table. An argument known only at run time may be any subcommand or flag,
// so it matches any conditional rule.
func destructiveMatch(base string, args []value) (string, bool) {
	r, ok := destructiveTable[base]
	if !ok {
		return "", false
	}
	if r.always {
		return r.why, true
	}
	if base == "mv" {
		return mvDevNull(args)
	}
	first := ""
	for _, a := range args {
		if !a.known {
			return base + " with an argument known only at run time (" + a.why + "): " + r.why, true
		}
		if first == "" && !strings.HasPrefix(a.s, "-") {
			first = a.s
		}
		for _, w := range r.anySubs {
			if a.s == w {
				return r.why, true
			}
		}
		name, _, _ := strings.Cut(a.s, "=")
		for _, f := range r.flags {
			if name == f || strings.HasSuffix(f, "*") && strings.HasPrefix(name, strings.TrimSuffix(f, "*")) {
				return r.why, true
			}
		}
		if r.shortFlags != "" && strings.HasPrefix(a.s, "-") && !strings.HasPrefix(a.s, "--") && strings.ContainsAny(a.s[1:], r.shortFlags) {
			return r.why, true
		}
	}
	for _, s := range r.subs {
		if first == s {
			return r.why, true
		}
	}
	return "", false
}

func mvDevNull(args []value) (string, bool) {
	for i, a := range args {
		if !a.known {
			if i == len(args)-1 {
				return "mv to a destination known only at run time may be /dev/null", true
			}
			continue
		}
		if a.s == "/dev/null" && (i == len(args)-1 || i > 0 && (args[i-1].s == "-t" || args[i-1].s == "--target-directory")) || a.s == "--target-directory=/dev/null" || a.s == "-t/dev/null" {
			return "mv onto /dev/null destroys the source", true
		}
	}
	return "", false
}
