//go:build pkgsftpsuite

package bastion

// pkg/sftp's own test files, which TestPkgSFTPIntegrationSuite compiles
// (`go test -c github.com/pkg/sftp`, within this module), import testify.
// This file, which no build compiles (its tag is never set), makes testify
// a requirement of this module's go.mod, so that `go mod download` fetches
// it with the rest and the suite builds without the network; `go mod tidy`
// reads every file whatever its tags, so it keeps the requirement.
import (
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
)
