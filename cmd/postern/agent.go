package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Register and manage agents (the SSH keys that use the bastion)",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	cmd.AddCommand(
		newAgentAddCmd(data),
		newAgentKeyCmd(data),
		newAgentListCmd(data),
		newAgentDisableCmd(data, true),
		newAgentDisableCmd(data, false),
		newAgentRemoveCmd(data),
	)
	return cmd
}

// readPublicKey reads one OpenSSH public key line from a file or stdin,
// skipping blank lines and # comments as an authorized_keys file may have.
func readPublicKey(cmd *cobra.Command, path string) (string, error) {
	b, err := readInput(cmd, path, "public key file (--key)")
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n"), nil
}

func newAgentAddCmd(data *dataFlag) *cobra.Command {
	var keyFile string
	var addKey bool
	cmd := &cobra.Command{
		Use:   "add NAME --key FILE",
		Short: "Register an agent by its OpenSSH public key (FILE - reads stdin)",
		Long: `add registers a new agent with one OpenSSH public key (a line of the form
"ssh-ed25519 AAAA... comment", as in id_ed25519.pub; --key - reads it from
stdin). With --add-key it gives an existing agent another key instead.`,
		Args: exactArgs(1, "the agent NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readPublicKey(cmd, keyFile)
			if err != nil {
				return err
			}
			return addAgentKey(cmd, data, args[0], key, addKey)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "OpenSSH public key file, - for stdin (required)")
	cmd.Flags().BoolVar(&addKey, "add-key", false, "add the key to an existing agent instead of creating one")
	return cmd
}

// addAgentKey creates agent name with key, or (existing) adds key to it.
func addAgentKey(cmd *cobra.Command, data *dataFlag, name, key string, existing bool) error {
	var a *store.Agent
	err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
		var err error
		if existing {
			a, err = m.AddAgentKey(cmd.Context(), data.actor("cli"), name, key)
		} else {
			a, err = m.AddAgent(cmd.Context(), data.actor("cli"), name, []string{key})
		}
		return err
	})
	if err != nil {
		return manageErr(err)
	}
	k := a.Keys[len(a.Keys)-1]
	if existing {
		fmt.Fprintf(cmd.OutOrStdout(), "added key %s to agent %s (%d keys)\n", k.Fingerprint, a.Name, len(a.Keys))
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "added agent %s (%s) with key %s\n", a.Name, a.ID, k.Fingerprint)
		fmt.Fprintf(cmd.OutOrStdout(), "next: postern grant %s ALIAS\n", a.Name)
	}
	return nil
}

func newAgentKeyCmd(data *dataFlag) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Add or remove public keys of an agent",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	var keyFile string
	add := &cobra.Command{
		Use:   "add NAME --key FILE",
		Short: "Give an existing agent another public key",
		Args:  exactArgs(1, "the agent NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readPublicKey(cmd, keyFile)
			if err != nil {
				return err
			}
			return addAgentKey(cmd, data, args[0], key, true)
		},
	}
	add.Flags().StringVar(&keyFile, "key", "", "OpenSSH public key file, - for stdin (required)")
	remove := &cobra.Command{
		Use:   "remove NAME FINGERPRINT",
		Short: "Remove one key (SHA256:... as shown by agent list) from an agent",
		Args:  exactArgs(2, "the agent NAME and the key's SHA256 FINGERPRINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a *store.Agent
			err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
				var err error
				a, err = m.RemoveAgentKey(cmd.Context(), data.actor("cli"), args[0], args[1])
				return err
			})
			if err != nil {
				return manageErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed key %s from agent %s (%d left)\n", args[1], a.Name, len(a.Keys))
			return nil
		},
	}
	cmd.AddCommand(add, remove)
	return cmd
}

func newAgentListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.Agent]{
		short:  "List agents and their key fingerprints",
		read:   (*store.Store).ListAgents,
		json:   func(a store.Agent) any { return model.AgentOf(a) },
		empty:  "no agents; add one with: postern agent add NAME --key FILE",
		header: []string{"NAME", "STATUS", "KEY", "CREATED"},
		rows: func(a store.Agent) [][]string {
			status := "enabled"
			if a.Disabled {
				status = "disabled"
			}
			var rows [][]string
			for i, k := range a.Keys {
				name, st, created := a.Name, status, timeText(a.CreatedAt)
				if i > 0 {
					name, st, created = "", "", "" // one row per key, the agent named once
				}
				rows = append(rows, []string{name, st, k.Fingerprint + " " + keyComment(k.AuthorizedKey), created})
			}
			return rows
		},
	})
}

// keyComment returns the key type and comment of an authorized_keys line,
// which help a person tell keys apart: "ssh-ed25519 ci@runner".
func keyComment(line string) string {
	f := strings.Fields(line)
	if len(f) > 2 {
		return "(" + f[0] + " " + strings.Join(f[2:], " ") + ")"
	}
	if len(f) > 0 {
		return "(" + f[0] + ")"
	}
	return ""
}

func newAgentDisableCmd(data *dataFlag, disable bool) *cobra.Command {
	use, short, done := "disable NAME", "Stop an agent from logging in, keeping its keys and grants", "disabled"
	if !disable {
		use, short, done = "enable NAME", "Let a disabled agent log in again", "enabled"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1, "the agent NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
				_, err := m.SetAgentDisabled(cmd.Context(), data.actor("cli"), args[0], disable)
				return err
			})
			if err != nil {
				return manageErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s agent %s\n", done, args[0])
			return nil
		},
	}
}

func newAgentRemoveCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Delete an agent with its keys and grants (audit rows stay)",
		Args:  exactArgs(1, "the agent NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
				_, err := m.RemoveAgent(cmd.Context(), data.actor("cli"), args[0])
				return err
			})
			if err != nil {
				return manageErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed agent %s\n", args[0])
			return nil
		},
	}
}
