// Command postern is the one binary of postern: the bastion server, the demo,
// the classifier and the admin commands. It stays thin: each subcommand parses
// its flags and calls into the packages that own the work.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		var ue usageError
		if asUsageError(err, &ue) {
			fmt.Fprintln(os.Stderr, "postern:", ue.Error())
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "postern:", err)
		os.Exit(1)
	}
}
