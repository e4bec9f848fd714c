package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/postern/postern/store"
)

// listSpec describes a `list` subcommand over one kind of record: how to
// read the records, how each looks in -o json, and the table a person
// reads otherwise.
type listSpec[T any] struct {
	short  string
	read   func(*store.Store, context.Context) ([]T, error) // a method expression such as (*store.Store).ListAgents
	json   func(T) any
	empty  string   // said instead of an empty table: how to add one
	header []string // table columns
	rows   func(T) [][]string
	// warning, when set, is a warning about a record, "" for none: each
	// is printed on stderr after the table, so that a person sees it and
	// a script reading the table does not trip on it.
	warning func(T) string
}

// newListCmd builds the `list` subcommand that spec describes. With -o json
// an empty list is [], never null.
func newListCmd[T any](data *dataFlag, spec listSpec[T]) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: spec.short,
		Args:  exactArgs(0, "no arguments"),
	}
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		s, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer s.Close()
		items, err := spec.read(s, cmd.Context())
		if err != nil {
			return err
		}
		return spec.write(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, items)
	}
	return cmd
}

// write writes items to w as -o json (an empty list is [], never null) or
// as spec's table, and their warnings to ew.
func (spec listSpec[T]) write(w, ew io.Writer, asJSON bool, items []T) error {
	if asJSON {
		js := make([]any, 0, len(items))
		for _, it := range items {
			js = append(js, spec.json(it))
		}
		return writeJSON(w, js)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, spec.empty)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(spec.header, "\t"))
	for _, it := range items {
		for _, row := range spec.rows(it) {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if spec.warning != nil {
		for _, it := range items {
			if msg := spec.warning(it); msg != "" {
				fmt.Fprintf(ew, "postern: warning: %s\n", msg)
			}
		}
	}
	return nil
}
