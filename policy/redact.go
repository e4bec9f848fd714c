package policy

import (
	"regexp"
	"strings"
)

// Redacted is the marker that replaces a secret in an audited operation. It
// holds no digits and no characters that any rule below treats as part of a
// secret's name, so redacting text twice gives the same text as redacting it
// once (Redact is idempotent, which FuzzRedact checks).
const Redacted = "[REDACTED]"

// RedactedKey replaces a whole PEM private-key block: the block's armour lines
// would otherwise tell a reader only what kind of key leaked.
const RedactedKey = "[REDACTED PRIVATE KEY]"

// A shell word value: single-quoted strings, double-quoted strings and runs of
// characters that cannot end a shell word, joined without space, as the shell
// joins them (-p""secret is the password "secret"). Stopping at the first
// quote leaked the rest of such a word (FuzzRedact found it). The price is
// over-redaction where a rule matches inside a quoted string: in
// `-d 'user=x&password=y' -H 'Accept: json'` the value runs on to the next
// quote's end, so ` -H 'Accept:` is hidden too. Hiding too much is the
// chosen error.
const valuePattern = `(?:'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'";&|<>()]+)+`

// valuePatternOpen is valuePattern or, as the whole value, a quote left open
// to the end of the text. It is used only inside the value of a harmless
// NAME=..., which a match bounds: there, an assignment can sit inside the
// outer word's quotes (X='...DB_PASSWORD='secret), and its value's opening
// quote closes the outer word's.
const valuePatternOpen = `(?:'[^']*$|"(?:[^"\\]|\\.)*$|` + valuePattern + `)`

// The rules. They are compiled once and never written after, so they are
// constants in all but name (the style's ban is on package-level *mutable*
// state).
var (
	// An unterminated block is redacted to the end of the text: a truncated
	// key is still a key.
	rePEM = regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)
	// Group 1 is the header name; group 2 an optional scheme word kept for
	// the reader (Basic, Bearer, token); group 3 the credentials, up to the
	// quote or line end that closes the header.
	reAuth = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization:[ \t]*)((?:basic|bearer|token|digest|negotiate|ntlm|aws4-hmac-sha256)[ \t]+)?([^\s'"][^'"\r\n]*)`)
	// A bearer token outside a header (JSON bodies, --oauth2-bearer).
	reBearer = regexp.MustCompile(`(?i)\b(bearer[ \t]+)([A-Za-z0-9\-._~+/]+=*)`)
	// scheme://user:password@host — the user name stays.
	reURLCreds = regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@'"]*:)([^\s/@'"]+)@`)
	// --password=X, --password X, --db-password X, --api-token X,
	// --client-secret X ... Options that name where the secret is rather than
	// the secret itself are let through by longOptFn.
	reLongOpt = regexp.MustCompile(`(?i)(--[A-Za-z0-9\-_]*(?:passw(?:or)?d|token|secret|api-?key|bearer|credential)[A-Za-z0-9\-_]*)(=|[ \t]+)(` + valuePattern + `)`)
	// NAME=value; whether NAME is secret-like is decided by secretName.
	reEnvAssign = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)=(` + valuePattern + `)`)
	// The same inside a harmless NAME=value's value (valuePatternOpen).
	reEnvAssignInner = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)=(` + valuePatternOpen + `)`)
	// sshpass -p X and sshpass -pX.
	reSSHPass = regexp.MustCompile(`\b(sshpass\b[^;&|\n]*?\s-p[ \t]*)(` + valuePattern + `)`)
	// One simple command of the MySQL family, up to the operator that ends
	// it. -pSECRET (no space: with a space the next word is the database and
	// MySQL prompts) is redacted only inside it, because elsewhere -pX means
	// something else (tar -pxf, mkdir -p).
	reMySQLCmd   = regexp.MustCompile(`\b(?:mysql[A-Za-z_\-]*|mariadb[A-Za-z_\-]*)\b[^;&|\n]*`)
	reMySQLShort = regexp.MustCompile(`(\s-p)(` + valuePattern + `)`)
	reAWSKey     = regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)
	// Tokens whose prefix says what they are: GitHub, GitLab, Slack.
	reKnownToken = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9\-_]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,})`)
	// Finnish personal identity code DDMMYYCNNNK; the date and the check
	// character are validated by validHETU to keep false hits rare.
	reHETU = regexp.MustCompile(`\b(\d{6})([-+A-FU-Y])(\d{3})([0-9A-FHJ-NPR-Y])\b`)
)

// Redact returns text with secrets replaced by markers: passwords given as
// arguments (mysql -pX, --password=X, --password X, sshpass -p X),
// NAME=value for secret-like names, Authorization headers and bearer tokens,
// URL passwords, AWS access key ids, well-known API tokens, PEM private-key
// blocks and Finnish personal identity codes (HETU). Everything else is kept,
// so an auditor still reads what ran. It is pure and safe for concurrent use.
//
// Redaction errs toward hiding too much: a rule that cannot tell where a
// secret ends hides up to the end of the word, line or text.
func Redact(text string) string {
	// Each rule runs only when the text holds what the rule needs to match:
	// most commands are plain, and skipping the regular expressions for them
	// keeps redaction a small part of an audited decision.
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(text, sub) {
				return true
			}
		}
		return false
	}
	// PEM first: the block's body is base64 that other rules might split.
	if has("PRIVATE KEY") {
		text = rePEM.ReplaceAllLiteralString(text, RedactedKey)
	}
	if containsFold(text, "authorization:") {
		text = replaceGroups(reAuth, text, func(m []string) string { return m[1] + m[2] + Redacted })
	}
	if containsFold(text, "bearer") {
		text = replaceGroups(reBearer, text, func(m []string) string { return m[1] + Redacted })
	}
	if has("://") {
		text = replaceGroups(reURLCreds, text, func(m []string) string { return m[1] + Redacted + "@" })
	}
	if has("--") {
		text = replaceGroups(reLongOpt, text, longOptFn)
	}
	if has("=") {
		text = redactAssignments(text)
	}
	if has("sshpass") {
		text = replaceGroups(reSSHPass, text, func(m []string) string { return m[1] + Redacted })
	}
	if has("mysql", "mariadb") {
		text = reMySQLCmd.ReplaceAllStringFunc(text, func(cmd string) string {
			return replaceGroups(reMySQLShort, cmd, func(m []string) string { return m[1] + Redacted })
		})
	}
	if has("AKIA", "ASIA") {
		text = reAWSKey.ReplaceAllLiteralString(text, Redacted)
	}
	if has("gh", "github_pat_", "glpat-", "xox") {
		text = reKnownToken.ReplaceAllLiteralString(text, Redacted)
	}
	if hasDigitRun(text, 6) {
		text = replaceGroups(reHETU, text, func(m []string) string {
			if !validHETU(m[1], m[3], m[4]) {
				return m[0]
			}
			return Redacted
		})
	}
	return text
}

// containsFold is strings.Contains ignoring ASCII case, for a lower-case
// ASCII sub, without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for ; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

// hasDigitRun reports whether s holds n ASCII digits in a row.
func hasDigitRun(s string, n int) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if '0' <= s[i] && s[i] <= '9' {
			run++
			if run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// longOptFn redacts the value of a secret-bearing long option, except for the
// options that name where the secret is rather than the secret itself
// (--password-file, --password-stdin, --token-env) and negations
// (--no-password), whose following word is an ordinary argument.
func longOptFn(m []string) string {
	name := strings.ToLower(m[1])
	if strings.HasPrefix(name, "--no-") {
		return m[0]
	}
	for _, suffix := range []string{"-file", "-stdin", "-path", "-env", "-command", "-cmd", "-prompt", "_file"} {
		if strings.HasSuffix(name, suffix) {
			return m[0]
		}
	}
	if m[2] != "=" && strings.HasPrefix(m[3], "-") {
		// --password -h host: the option took no value (MySQL prompts).
		return m[0]
	}
	return m[1] + m[2] + Redacted
}

// secretName reports whether an environment-style name looks like it holds a
// secret: it contains TOKEN, SECRET, PASSWORD or PASSWD, or ends in _KEY or
// _PWD (MYSQL_PWD), compared without case. PWD alone is the working
// directory and stays.
func secretName(name string) bool {
	u := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_PWD") || strings.HasSuffix(u, "APIKEY")
}

// hetuCheck is the table of HETU check characters, indexed by the nine digits
// DDMMYYNNN modulo 31.
const hetuCheck = "0123456789ABCDEFHJKLMNPRSTUVWXY"

// validHETU checks that a candidate HETU has a real calendar day, an
// individual number of at least 002, and the right check character. Without
// the check, dates in file names (backup-010203-1234) would be redacted.
func validHETU(date, individual, check string) bool {
	day := atoi2(date[0:2])
	month := atoi2(date[2:4])
	if day < 1 || day > 31 || month < 1 || month > 12 {
		return false
	}
	if individual < "002" {
		return false
	}
	n := 0
	for _, c := range date + individual {
		n = n*10 + int(c-'0')
	}
	return hetuCheck[n%31] == check[0]
}

func atoi2(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }

// replaceGroups calls fn with the submatches of every match of re in s and
// puts its result in place of the match.
func replaceGroups(re *regexp.Regexp, s string, fn func(m []string) string) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, loc := range idx {
		m := make([]string, len(loc)/2)
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			}
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(fn(m))
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactAssignments redacts the values of secret-like NAME=value words. The
// value of a harmless name is searched in turn: a quoted value can hold
// assignments of its own (X="API_TOKEN=..."), which a match of the outer
// word would otherwise hide from the rule. Each level is strictly shorter,
// so the recursion ends.
func redactAssignments(text string) string {
	return redactAssignmentsWith(reEnvAssign, text)
}

func redactAssignmentsWith(re *regexp.Regexp, text string) string {
	return replaceGroups(re, text, func(m []string) string {
		if secretName(m[1]) {
			return m[1] + "=" + Redacted
		}
		if !strings.Contains(m[2], "=") {
			return m[0]
		}
		return m[1] + "=" + redactAssignmentsWith(reEnvAssignInner, m[2])
	})
}
