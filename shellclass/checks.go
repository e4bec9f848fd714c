package shellclass

import "strings"

// The checks of read entries that an option list cannot say (readEntry.check
// in tables_read.go).

// sedCheck accepts a sed program only when it cannot write or run anything:
// no in-place edit, no script file, no e/w/W/r/R commands and no s///e or w
// flags.
func sedCheck(p *parsed, terminal bool) (Class, string) {
	scripts := p.values("-e", "--expression")
	ops := p.operands
	if len(scripts) == 0 {
		if len(ops) == 0 {
			return Write, "sed without a script"
		}
		if !ops[0].known {
			return Destructive, "sed script known only at run time"
		}
		scripts = []string{ops[0].s}
	}
	for _, s := range scripts {
		for _, f := range sedFiles(s) {
			if dev, ok := opensDevice(value{s: f, known: true}); ok {
				return Destructive, "sed script opens " + dev + ": " + deviceWhy
			}
			if isBlockDevice(f) {
				return Destructive, "sed script may write block device " + f
			}
		}
		if why, ok := sedScriptSafe(s); !ok {
			return Write, "sed script " + why
		}
	}
	return Read, ""
}

func printfCheck(p *parsed, terminal bool) (Class, string) {
	if p.has("-v") {
		return Write, "printf -v assigns a variable"
	}
	if len(p.operands) == 0 {
		return Read, ""
	}
	// A format known only at run time is harmless: neither bash's printf
	// nor coreutils' has a conversion that writes, and the builtin checks
	// its first word for -v before this (printfBuiltin).
	f := p.operands[0]
	if f.known && strings.Contains(f.s, "%n") {
		return Write, "printf %n writes to memory"
	}
	return Read, ""
}

func dateCheck(p *parsed, terminal bool) (Class, string) {
	for _, o := range p.operands {
		if !strings.HasPrefix(o.s, "+") {
			return Write, "date with operand " + o.s + " sets the clock"
		}
	}
	return Read, ""
}

func psCheck(p *parsed, terminal bool) (Class, string) {
	// BSD-style ps options (`ps aux`) come as one operand of letters.
	for _, o := range p.operands {
		for i := 0; i < len(o.s); i++ {
			if !strings.ContainsRune("aAcCeEfgHjlLmMnrsStTuvwxXZ", rune(o.s[i])) && !(o.s[i] >= '0' && o.s[i] <= '9') {
				return Write, "ps operand " + o.s + " is not a known selector"
			}
		}
	}
	return Read, ""
}

// lspciCheck: lspci -xxx and -xxxx read parts of PCI configuration space
// that make some devices crash (lspci(8)); -x and -xx are the standard
// header.
func lspciCheck(p *parsed, terminal bool) (Class, string) {
	n := 0
	for _, o := range p.opts {
		if o.name == "-x" {
			n++
		}
	}
	if n > 2 {
		return Destructive, "lspci -xxx reads PCI configuration space that crashes some devices (lspci(8))"
	}
	return Read, ""
}

// lsofCheck: lsof's +options (+r repeats forever, +m names a mount
// supplement file, +c, +w ...) are not on the allowlist; a +word is taken
// for an operand by the option parser.
func lsofCheck(p *parsed, terminal bool) (Class, string) {
	for _, o := range p.operands {
		if strings.HasPrefix(o.s, "+") {
			return Write, "lsof option " + o.s + " is not on the read allowlist"
		}
	}
	return Read, ""
}

// freeCheck: free -s N repeats until interrupted unless -c bounds it.
func freeCheck(p *parsed, terminal bool) (Class, string) {
	if p.has("-s", "--seconds") && !p.has("-c", "--count") {
		return Write, "free -s without -c runs until interrupted"
	}
	return Read, ""
}

// repeatCheck: vmstat and iostat take `[interval [count]]` as their last
// operands; an interval with no count repeats until interrupted.
func repeatCheck(p *parsed, terminal bool) (Class, string) {
	numbers := 0
	for _, o := range p.operands {
		if isFD(o.s) {
			numbers++
		}
	}
	if numbers == 1 {
		return Write, "an interval without a count runs until interrupted"
	}
	return Read, ""
}

// dmesgCheck refuses -H without --nopager on a terminal: the human format
// starts a pager there.
func dmesgCheck(p *parsed, terminal bool) (Class, string) {
	if terminal && p.has("-H", "--human") && !p.has("-P", "--nopager") {
		return Write, "dmesg -H starts a pager on a terminal; add --nopager"
	}
	return Read, ""
}
