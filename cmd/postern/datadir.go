package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/postern/postern/store"
)

// Environment variables the admin commands read. They are read here, in
// main's package, and passed down; the store package never reads the
// environment.
const (
	envData          = "POSTERN_DATA"
	envMasterKeyFile = "POSTERN_MASTER_KEY_FILE"
	defaultDataDir   = "./postern-data"
)

// dataFlag is the --data flag shared by every command that uses the data
// directory. Register it with addDataFlag and open the store with open.
type dataFlag struct {
	dir string
}

// addDataFlag registers --data DIR on cmd (persistent, so that a command
// group like `agent` gives it to all its subcommands). The default comes
// from POSTERN_DATA, then ./postern-data.
func addDataFlag(cmd *cobra.Command) *dataFlag {
	f := &dataFlag{}
	def := os.Getenv(envData)
	if def == "" {
		def = defaultDataDir
	}
	cmd.PersistentFlags().StringVar(&f.dir, "data", def,
		"data directory (env "+envData+")")
	return f
}

// storeDir names the data directory's files, with the master key file from
// POSTERN_MASTER_KEY_FILE when set.
func (f *dataFlag) storeDir() store.Dir {
	return store.Dir{Path: f.dir, MasterKeyFile: os.Getenv(envMasterKeyFile)}
}

// open opens the store of an initialised data directory. The caller closes
// it.
func (f *dataFlag) open(ctx context.Context) (*store.Store, error) {
	s, err := f.storeDir().Open(ctx, store.Options{})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// storeErr turns errors caused by the admin's input (unknown name, taken
// alias, malformed key, bad rule) into usage errors, so that main exits 2.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDuplicate) || errors.Is(err, store.ErrInvalid) {
		return usageError{err}
	}
	return err
}

// outputFlag is -o/--output for list commands: "text" (default) or "json".
type outputFlag struct {
	format string
}

func addOutputFlag(cmd *cobra.Command) *outputFlag {
	f := &outputFlag{}
	cmd.Flags().StringVarP(&f.format, "output", "o", "text", "output format: text or json")
	return f
}

// json reports whether JSON was asked for; an unknown format is a usage
// error.
func (f *outputFlag) json() (bool, error) {
	switch f.format {
	case "text", "":
		return false, nil
	case "json":
		return true, nil
	}
	return false, usageError{fmt.Errorf("unknown output format %q: want text or json", f.format)}
}

// writeJSON prints v as indented JSON with a trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
