//go:build unix

package demotarget

import (
	"errors"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the command in its own process group, so that kill
// and signals reach the children the shell started too.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// kill kills the command's process group.
func (p *process) kill() {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// sshSignals are the signal names of RFC 4254 §6.10 with their numbers. It
// is a function, not a package variable, so that nothing can change it.
func sshSignals() map[string]syscall.Signal {
	return map[string]syscall.Signal{
		"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
		"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
		"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
		"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
		"USR2": syscall.SIGUSR2,
	}
}

// signal sends the SSH-named signal to the command's process group.
func (p *process) signal(name string) error {
	sig, ok := sshSignals()[name]
	if !ok {
		return errors.New("demotarget: unknown signal " + name)
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// signalOf reports how a command killed by a signal ended: by the signal's
// SSH name when RFC 4254 has one, otherwise (ok false) the caller reports
// the exit status a shell would show, 128 + the signal number.
func signalOf(ee *exec.ExitError) (name string, core, ok bool) {
	ws, isWS := ee.Sys().(syscall.WaitStatus)
	if !isWS || !ws.Signaled() {
		return "", false, false
	}
	for n, s := range sshSignals() {
		if s == ws.Signal() {
			return n, ws.CoreDump(), true
		}
	}
	return "", false, false
}

// signalNumber is the number of the signal that ended the command, 0 if none.
func signalNumber(ee *exec.ExitError) int {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal())
	}
	return 0
}
