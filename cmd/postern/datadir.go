package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

// Environment variables the admin commands read. They are read here, in
// main's package, and passed down; the store package never reads the
// environment.
const (
	envData          = "POSTERN_DATA"
	envAdmin         = "POSTERN_ADMIN" // the admin the CLI acts as without --as
	envMasterKeyFile = "POSTERN_MASTER_KEY_FILE"
	envDatabaseURL   = "POSTERN_DATABASE_URL"
	defaultDataDir   = "./postern-data"
)

// dataFlag is the --data and --database flags shared by every command that
// uses the data directory. Register them with addDataFlag and open the
// store with open.
type dataFlag struct {
	dir      string
	database string
	cmd      *cobra.Command
	// as is --as (or POSTERN_ADMIN) where addAsFlag registered it: the
	// admin the command acts as. admin is that admin's name once
	// withManager found it registered, "" without --as.
	as, admin, adminID string
	// log receives the warnings of opening the data directory (a file
	// open to others, whose mode was fixed): serve's log when serve sets
	// it, else warnings on the command's standard error.
	log *zerolog.Logger
}

// addDataFlag registers --data DIR and --database URL on cmd (persistent,
// so that a command group like `agent` gives them to all its subcommands).
// The defaults come from POSTERN_DATA, then ./postern-data, and from
// POSTERN_DATABASE_URL, then none (SQLite in the data directory).
func addDataFlag(cmd *cobra.Command) *dataFlag {
	f := &dataFlag{cmd: cmd}
	def := os.Getenv(envData)
	if def == "" {
		def = defaultDataDir
	}
	cmd.PersistentFlags().StringVar(&f.dir, "data", def,
		"data directory (env "+envData+"): the master key and host key, and the SQLite database unless --database is set")
	cmd.PersistentFlags().StringVar(&f.database, "database", os.Getenv(envDatabaseURL),
		"PostgreSQL database, postgres://USER@HOST:PORT/DB (env "+envDatabaseURL+"; the password from PGPASSWORD or ~/.pgpass keeps it out of the URL); SQLite in the data directory if empty")
	return f
}

// storeDir names the data directory's files, with the master key file from
// POSTERN_MASTER_KEY_FILE when set, and the database.
func (f *dataFlag) storeDir() store.Dir {
	return store.Dir{Path: f.dir, MasterKeyFile: os.Getenv(envMasterKeyFile), DatabaseURL: f.database}
}

// check refuses a --database that is not a PostgreSQL URL, as a usage
// error; the URL is not repeated, since it may hold a password.
func (f *dataFlag) check() error {
	if f.database != "" && !store.IsPostgresURL(f.database) {
		return usagef("--database (or %s) must be a postgres:// or postgresql:// URL; leave it empty for SQLite in the data directory", envDatabaseURL)
	}
	return nil
}

// open opens the store of an initialised data directory. The caller closes
// it.
func (f *dataFlag) open(ctx context.Context) (*store.Store, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	s, err := f.storeDir().Open(ctx, f.options())
	if err != nil {
		return nil, err
	}
	return s, nil
}

// options are the store options of a command on the data directory: the
// log for what opening it fixes, and the web page's TLS key among the
// files kept from group and others.
func (f *dataFlag) options() store.Options {
	log := f.log
	if log == nil {
		l, err := newLogger(f.cmd.ErrOrStderr(), "warn")
		if err != nil {
			panic(err) // "warn" is a level
		}
		log = &l
	}
	return store.Options{Logger: log, SecretFiles: dataSecretFiles}
}

// dataSecretFiles are the files of the data directory, besides the store's
// own, that only its owner may read (store.Dir.CheckModes).
var dataSecretFiles = []string{web.SelfSignedKeyFile}

// storeErr turns errors caused by the admin's input (unknown name, taken
// alias, malformed key, bad rule) into usage errors, so that main exits 2,
// shown in the words the store wrote for the admin (userError).
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrDuplicate) || errors.Is(err, store.ErrInvalid) {
		return usageError{userError{err}}
	}
	return err
}

// userError shows err as the message of the *usererr.Error in its chain
// (the words the layer that refused wrote for a person, without the
// packages it came through) and keeps err for errors.Is. An error without
// one is shown whole: the CLI runs on the server for its operator, and
// stderr is the only place it can tell the cause.
type userError struct{ err error }

func (e userError) Error() string { return usererr.Message(e.err, e.err.Error()) }
func (e userError) Unwrap() error { return e.err }

// usagef is a usage error (exit status 2) with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exactArgs is cobra.ExactArgs that names the expected arguments and
// returns a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %s, got %d argument(s)", cmdPath(cmd), names, len(args))
		}
		return nil
	}
}

// groupRunE is the RunE of a command that only holds subcommands (agent,
// conn): without it cobra prints help and exits 0 for a mistyped
// subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(args) == 0 {
		return usagef("%s: missing subcommand (%s)", cmdPath(cmd), strings.Join(names, ", "))
	}
	return usagef("%s: unknown subcommand %q (want %s)", cmdPath(cmd), args[0], strings.Join(names, ", "))
}

// cmdPath is the command path without the program name ("agent add"),
// because main already prefixes every error with "postern: ".
func cmdPath(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// readInput reads a file named on the command line, or standard input for
// "-". what names it in errors ("public key file"); the content never
// appears in an error, since it may be a secret.
func readInput(cmd *cobra.Command, path, what string) ([]byte, error) {
	if path == "" {
		return nil, usagef("%s: missing %s", cmdPath(cmd), what)
	}
	if path == "-" {
		b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxInputFile+1))
		if err != nil {
			return nil, fmt.Errorf("read %s from stdin: %w", what, err)
		}
		if len(b) > maxInputFile {
			return nil, usagef("%s on stdin is larger than %d bytes", what, maxInputFile)
		}
		return b, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, usagef("%s: %v", what, err)
	}
	if st.IsDir() || st.Size() > maxInputFile {
		return nil, usagef("%s %s is a directory or over %d bytes", what, path, maxInputFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("%s: %v", what, err)
	}
	return b, nil
}

// maxInputFile bounds the files read by the admin commands (keys, password
// files); real keys are a few kilobytes at most.
const maxInputFile = 64 << 10

// timeText shows a stored time in lists: UTC, to the second, "-" if zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
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
