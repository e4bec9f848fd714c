// Command postern is the one binary of postern: the bastion server, the demo,
// the classifier and the admin commands. It stays thin: each subcommand parses
// its flags and calls into the packages that own the work.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs postern with args (without the program name) and returns the
// exit status: 0, 2 for a usage error, 1 for any other failure. The whole
// command line goes through here, so that the CLI's tests can run it in
// their own process, as an admin would run it in a shell, without starting
// one process per command.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	// cobra reads os.Args when the arguments are nil.
	root.SetArgs(append([]string{}, args...))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		var held heldNotice
		if errors.As(err, &held) {
			fmt.Fprintln(stdout, held.Error())
			return 0
		}
		var ue usageError
		if asUsageError(err, &ue) {
			fmt.Fprintln(stderr, "postern:", ue.Error())
			return 2
		}
		fmt.Fprintln(stderr, "postern:", err)
		return 1
	}
	return 0
}
