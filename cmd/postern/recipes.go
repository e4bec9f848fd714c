package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/postern/postern/recipes"
)

// newRecipesCmd is `postern recipes`: the embedded catalog of target kinds.
// It needs no data directory: the catalog is part of the binary.
func newRecipesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipes",
		Short: "Browse the catalog of target kinds (hosts, credentials, docs)",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newRecipesListCmd(), newRecipesShowCmd())
	return cmd
}

func newRecipesListCmd() *cobra.Command {
	var f recipes.Filter
	cmd := &cobra.Command{
		Use:   "list [--q TEXT] [--vendor V] [--host H]",
		Short: "List recipes, optionally filtered",
		Long: `list shows the recipes in the catalog. --q matches text in the key,
name, vendor, notes and host patterns; --vendor the whole vendor name; --host
keeps the recipes claiming that host (the one a connection to it would use
is marked in the MATCH column). With -o json the answer is the REST API's:
{"data": [...], "request_id": "..."}.`,
		Args: exactArgs(0, "no arguments"),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Q, "q", "", "text to look for")
	fl.StringVar(&f.Vendor, "vendor", "", "vendor name (case-insensitive)")
	fl.StringVar(&f.Host, "host", "", "host name the recipes must claim")
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		c, err := recipes.Load()
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if asJSON {
			return writeJSON(w, recipes.Response{Data: c.PublicList(f), RequestID: recipes.NewRequestID()})
		}
		return writeRecipeList(w, c, f)
	}
	return cmd
}

// writeRecipeList prints the list as a table. With --host, MATCH marks the
// recipe Match picks for that host, so an admin sees which rules apply.
func writeRecipeList(w io.Writer, c *recipes.Catalog, f recipes.Filter) error {
	list := c.List(f)
	if len(list) == 0 {
		if f.Host != "" && f.Q == "" && f.Vendor == "" {
			fmt.Fprintf(w, "no recipe claims %s; it is classified by the built-in rules\n", f.Host)
			return nil
		}
		fmt.Fprintln(w, "no recipes match")
		return nil
	}
	var best *recipes.Recipe
	if f.Host != "" {
		best = c.Match(f.Host)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "KEY\tNAME\tVENDOR\tADAPTER\tHOSTS"
	if f.Host != "" {
		header += "\tMATCH"
	}
	fmt.Fprintln(tw, header)
	for _, r := range list {
		hosts := strings.Join(r.Hosts, ",")
		if hosts == "" {
			hosts = "-"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.Key, r.Name, r.Vendor, r.Adapter, hosts)
		if f.Host != "" {
			mark := ""
			if r == best {
				mark = "*"
			}
			line += "\t" + mark
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func newRecipesShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one recipe: hosts, credential fields and where keys are made",
		Args:  exactArgs(1, "the recipe KEY"),
	}
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		c, err := recipes.Load()
		if err != nil {
			return err
		}
		r := c.Get(args[0])
		if r == nil {
			return usagef("recipes show: unknown recipe %q (see postern recipes list)", args[0])
		}
		w := cmd.OutOrStdout()
		if asJSON {
			return writeJSON(w, recipes.Response{Data: r.Public(), RequestID: recipes.NewRequestID()})
		}
		return writeRecipe(w, r.Public())
	}
	return cmd
}

// writeRecipe prints the public view of one recipe, field per line.
func writeRecipe(w io.Writer, p recipes.PublicRecipe) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	or := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintf(tw, "key:\t%s\n", p.Key)
	fmt.Fprintf(tw, "name:\t%s\n", p.Name)
	fmt.Fprintf(tw, "vendor:\t%s\n", p.Vendor)
	fmt.Fprintf(tw, "version:\t%d\n", p.Version)
	fmt.Fprintf(tw, "channel:\t%s\n", p.Channel)
	fmt.Fprintf(tw, "adapter:\t%s\n", p.Adapter)
	fmt.Fprintf(tw, "hosts:\t%s\n", or(strings.Join(p.Hosts, ", ")))
	fmt.Fprintf(tw, "connection hosts:\t%s\n", or(strings.Join(p.ConnectionHosts, ", ")))
	fmt.Fprintf(tw, "connection domains:\t%s\n", or(strings.Join(p.ConnectionDomains, ", ")))
	for _, cf := range p.CredentialFields {
		var attrs []string
		if cf.Required {
			attrs = append(attrs, "required")
		}
		if cf.Secret {
			attrs = append(attrs, "secret")
		}
		fmt.Fprintf(tw, "credential:\t%s (%s) %s\n", cf.Name, cf.Label, strings.Join(attrs, ", "))
	}
	fmt.Fprintf(tw, "docs:\t%s\n", or(p.DocsURL))
	fmt.Fprintf(tw, "create key:\t%s\n", or(p.CreateURL))
	fmt.Fprintf(tw, "revoke key:\t%s\n", or(p.RevokeURL))
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Notes != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", p.Notes)
		return err
	}
	return nil
}
