package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion is what the binary knows of its own build, from the build
// information the Go toolchain stamps into it (runtime/debug.ReadBuildInfo):
// the module version (a tag for `go install ...@v1.2.3`, "(devel)" for a
// build from a checkout), the commit and its time (the build's date: the
// toolchain records no other), whether the tree had uncommitted changes,
// and the Go version.
type buildVersion struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`      // "" when built outside a git checkout
	CommitTime string `json:"commit_time"` // RFC 3339; "" with Commit
	Modified   bool   `json:"modified"`    // built with uncommitted changes
	Go         string `json:"go"`
}

// readBuildVersion reads the binary's build information.
func readBuildVersion() buildVersion {
	return buildVersionOf(debug.ReadBuildInfo())
}

// buildVersionOf is what bi says of a build; ok false when the binary
// carries none.
func buildVersionOf(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: "(unknown)"}
	if !ok {
		return v
	}
	v.Go = bi.GoVersion
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// text is the version on a few lines, as `postern version` and
// `postern --version` print it.
func (v buildVersion) text() string {
	commit, date := v.Commit, v.CommitTime
	if commit == "" {
		commit, date = "unknown (built outside a git checkout)", "unknown"
	} else if v.Modified {
		commit += " (with uncommitted changes)"
	}
	return fmt.Sprintf("postern %s\ncommit:     %s\nbuild date: %s (the commit's)\ngo:         %s\n", v.Version, commit, date, v.Go)
}

func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version",
		Args:  exactArgs(0, "no arguments"),
	}
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		v := readBuildVersion()
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), v)
		}
		_, err = io.WriteString(cmd.OutOrStdout(), v.text())
		return err
	}
	return cmd
}
