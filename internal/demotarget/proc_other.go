//go:build !unix

package demotarget

import (
	"errors"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func (p *process) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
}

func (p *process) signal(string) error {
	return errors.New("demotarget: signals are not supported on this system")
}

func signalOf(*exec.ExitError) (string, bool, bool) { return "", false, false }

func signalNumber(*exec.ExitError) int { return 0 }
