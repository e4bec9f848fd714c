package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

// generatedPasswordBytes is the entropy of a generated admin password: 144
// bits, 24 characters of base64url, more than any login limit lets an
// attacker try.
const generatedPasswordBytes = 18

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage the admins who log in to the web page",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	cmd.AddCommand(
		newAdminAddCmd(data),
		newAdminListCmd(data),
		newAdminPasswdCmd(data),
		newAdminRoleCmd(data),
	)
	return cmd
}

func newAdminAddCmd(data *dataFlag) *cobra.Command {
	var passwordFile, role string
	cmd := &cobra.Command{
		Use:   "add NAME [--role ROLE] [--password-file FILE]",
		Short: "Add an admin for the web page",
		Long: `add creates an admin account for the web page. The password is the first line
of FILE (- reads stdin), at least ` + fmt.Sprint(web.MinPasswordLength) + ` characters; without --password-file a
strong password is generated and printed once. postern keeps only its
argon2id hash.

--role is viewer (sees everything, decides nothing), approver (also decides
approvals and re-checks keys; the default), admin (also changes
configuration) or owner (also manages admins). The installation's first
admin is an owner and is made at once; after it, an admin or owner waits
for a second admin's approval (postern approvals list).`,
		Args: exactArgs(1, "the admin NAME"),
	}
	addPasswordFileFlag(cmd, &passwordFile)
	cmd.Flags().StringVar(&role, "role", "", "viewer, approver, admin or owner (default approver; the first admin: owner)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := args[0]
		if err := store.ValidateName("admin", name); err != nil {
			return storeErr(err)
		}
		return storePassword(cmd, data, passwordFile, func(ctx context.Context, m *manage.Manager, hash string) (*store.Admin, error) {
			return m.AddAdmin(ctx, data.actor("cli"), name, hash, store.Role(role))
		}, func(a *store.Admin) string { return fmt.Sprintf("added admin %s (%s), role %s", a.Name, a.ID, a.Role) })
	}
	return cmd
}

func newAdminPasswdCmd(data *dataFlag) *cobra.Command {
	var passwordFile string
	cmd := &cobra.Command{
		Use:   "passwd NAME [--password-file FILE]",
		Short: "Set an admin's password and end the admin's web sessions",
		Long: `passwd replaces an admin's password with the first line of FILE (- reads
stdin), or with a generated one printed once, and logs the admin out of
every browser.`,
		Args: exactArgs(1, "the admin NAME"),
	}
	addPasswordFileFlag(cmd, &passwordFile)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return storePassword(cmd, data, passwordFile, func(ctx context.Context, m *manage.Manager, hash string) (*store.Admin, error) {
			return m.SetAdminPassword(ctx, data.actor("cli"), args[0], hash)
		}, func(a *store.Admin) string {
			return "changed the password of admin " + a.Name + "; the admin's web sessions were ended"
		})
	}
	return cmd
}

// storePassword reads or generates a password, hashes it, stores the hash
// with save, prints what it did (done) and prints a generated password
// once.
func storePassword(cmd *cobra.Command, data *dataFlag, passwordFile string,
	save func(ctx context.Context, m *manage.Manager, hash string) (*store.Admin, error), done func(*store.Admin) string) error {
	pw, generated, err := adminPassword(cmd, passwordFile)
	if err != nil {
		return err
	}
	hash, err := hashPassword(cmd, pw)
	if err != nil {
		return err
	}
	var a *store.Admin
	err = withManager(cmd.Context(), data, func(m *manage.Manager) error {
		var err error
		a, err = save(cmd.Context(), m, hash)
		return err
	})
	w := cmd.OutOrStdout()
	var held *manage.HeldError
	if errors.As(err, &held) && generated {
		// The admin exists once a second admin approves, with this
		// password, which is shown now or never.
		printGeneratedPassword(w, cmd.Flags().Arg(0), pw)
	}
	if err != nil {
		return manageErr(err)
	}
	fmt.Fprintln(w, done(a))
	if generated {
		printGeneratedPassword(w, a.Name, pw)
	}
	return nil
}

func newAdminListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.Admin]{
		short:  "List admins (never their password hashes)",
		read:   (*store.Store).ListAdmins,
		json:   func(a store.Admin) any { return model.AdminOf(a) },
		empty:  "no admins; add one with: postern admin add NAME",
		header: []string{"NAME", "ID", "ROLE", "STATUS", "CREATED", "MODIFIED"},
		rows: func(a store.Admin) [][]string {
			status := "enabled"
			if a.Disabled {
				status = "disabled"
			}
			return [][]string{{a.Name, a.ID, string(a.Role), status, timeText(a.CreatedAt), timeText(a.ModifiedAt)}}
		},
	})
}

func newAdminRoleCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "role NAME ROLE",
		Short: "Change an admin's role (raising one waits for a second admin)",
		Long: `role sets an admin's role: viewer, approver, admin or owner. Lowering a role
applies at once, and counts at once for the admin's open sessions and
tokens; raising one waits for a second admin's approval.`,
		Args: exactArgs(2, "the admin NAME and a ROLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				a, err := m.SetAdminRole(cmd.Context(), data.actor("cli"), args[0], store.Role(args[1]))
				if err != nil {
					return manageErr(err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "admin %s now has the %s role\n", a.Name, a.Role)
				return err
			})
		},
	}
}

func addPasswordFileFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "password-file", "",
		"file whose first line is the password (- reads stdin); without it a password is generated and printed once")
}

// adminPassword is the first line of the --password-file, without its line
// ending, or a generated password (and true) when no file is given. Errors
// name the file, never its content.
func adminPassword(cmd *cobra.Command, path string) (string, bool, error) {
	if path == "" {
		return newPassword(), true, nil
	}
	b, err := readInput(cmd, path, "password file (--password-file)")
	if err != nil {
		return "", false, err
	}
	defer clear(b)
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", false, usagef("%s: the first line of the password file is empty", cmdPath(cmd))
	}
	return line, false, nil
}

// hashPassword hashes an admin password; a password web refuses (too short
// or too long) is a usage error, and no message carries the password.
func hashPassword(cmd *cobra.Command, pw string) (string, error) {
	if n := len(pw); n < web.MinPasswordLength {
		return "", usagef("%s: the password has %d characters; want at least %d", cmdPath(cmd), n, web.MinPasswordLength)
	}
	hash, err := web.HashPassword(pw)
	if err != nil {
		return "", usagef("%s: %w", cmdPath(cmd), err)
	}
	return hash, nil
}

// newPassword is a random admin password of generatedPasswordBytes.
func newPassword() string {
	b := make([]byte, generatedPasswordBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// printGeneratedPassword shows a generated password the one time it exists
// outside the admin's hands.
func printGeneratedPassword(w io.Writer, name, pw string) {
	fmt.Fprintf(w, "password: %s\n", pw)
	fmt.Fprintf(w, "This password is shown only now: postern keeps only its hash. Change it with: postern admin passwd %s\n", name)
}
