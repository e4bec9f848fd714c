package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/postern/postern/shellclass"
	"github.com/spf13/cobra"
)

// newClassifyCmd is `postern classify`. Its output is a contract other tools
// depend on: keep the text and JSON shapes stable.
func newClassifyCmd() *cobra.Command {
	var shell, output string
	var jsonl bool
	cmd := &cobra.Command{
		Use:   "classify [--shell bash|posix] [-o text|json] -- COMMAND | classify --jsonl",
		Short: "Print the class (read, write, destructive) of a command string and why",
		Long: `classify reads a command string the way the target's shell will and prints
its class and the reasons. With --jsonl it reads standard input line by line;
each line is a JSON string or an object with a "command" field, and each gets
one JSON line back: {"class":...,"reasons":[...]} or {"error":...}.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := shellclass.ParseDialect(shell)
			if err != nil {
				return usageError{err}
			}
			opts := shellclass.Options{Dialect: d}
			if jsonl {
				if len(args) > 0 {
					return usageError{errors.New("classify: --jsonl reads standard input; give no COMMAND")}
				}
				return classifyJSONL(cmd.InOrStdin(), cmd.OutOrStdout(), opts)
			}
			if len(args) != 1 {
				return usageError{errors.New("classify: want exactly one COMMAND after --, quoted as one argument")}
			}
			res := shellclass.Classify(args[0], opts)
			switch output {
			case "json":
				return json.NewEncoder(cmd.OutOrStdout()).Encode(jsonResult(res))
			case "text":
				return writeText(cmd.OutOrStdout(), res)
			}
			return usageError{fmt.Errorf("classify: unknown output %q (want text or json)", output)}
		},
	}
	cmd.Flags().StringVar(&shell, "shell", "bash", "shell dialect of the target: bash or posix")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&jsonl, "jsonl", false, "read JSON lines from standard input, write one JSON result per line")
	return cmd
}

// classifyResult is the JSON shape of the CLI contract: class and reasons
// with span, class and why only.
type classifyResult struct {
	Class   shellclass.Class `json:"class"`
	Reasons []classifyReason `json:"reasons"`
}

type classifyReason struct {
	Span  string           `json:"span"`
	Class shellclass.Class `json:"class"`
	Why   string           `json:"why"`
}

func jsonResult(r shellclass.Result) classifyResult {
	out := classifyResult{Class: r.Class, Reasons: make([]classifyReason, 0, len(r.Reasons))}
	for _, rs := range r.Reasons {
		out.Reasons = append(out.Reasons, classifyReason{Span: rs.Span, Class: rs.Class, Why: rs.Why})
	}
	return out
}

func writeText(w io.Writer, r shellclass.Result) error {
	if _, err := fmt.Fprintln(w, r.Class); err != nil {
		return err
	}
	for _, rs := range r.Reasons {
		if _, err := fmt.Fprintf(w, "  %s: %s (%q)\n", rs.Class, rs.Why, rs.Span); err != nil {
			return err
		}
	}
	return nil
}

// classifyJSONL answers one JSON line per input line, in order. A line that
// is not valid JSON gets {"error":...} and the run goes on; only a failure
// to read standard input (or write the answer) ends it with an error.
func classifyJSONL(in io.Reader, out io.Writer, opts shellclass.Options) error {
	r := bufio.NewReader(in)
	bw := bufio.NewWriter(out)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for {
		line, err := r.ReadString('\n')
		if len(line) > 0 {
			if encErr := enc.Encode(classifyLine(strings.TrimRight(line, "\r\n"), opts)); encErr != nil {
				return fmt.Errorf("classify: write: %w", encErr)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = bw.Flush()
			return fmt.Errorf("classify: read standard input: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("classify: write: %w", err)
	}
	return nil
}

func classifyLine(line string, opts shellclass.Options) any {
	var raw json.RawMessage
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return map[string]string{"error": "invalid JSON: " + err.Error()}
	}
	var cmd string
	if err := json.Unmarshal(raw, &cmd); err != nil {
		var obj struct {
			Command *string `json:"command"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Command == nil {
			return map[string]string{"error": `want a JSON string or an object with a "command" string field`}
		}
		cmd = *obj.Command
	}
	return jsonResult(shellclass.Classify(cmd, opts))
}
