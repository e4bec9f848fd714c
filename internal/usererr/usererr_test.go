package usererr

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// TestMessageThroughWrapping: the message of an *Error is found through
// any wrapping, unchanged; an error without one gives the generic
// message; the cause stays reachable.
func TestMessageThroughWrapping(t *testing.T) {
	sentinel := errors.New("not found")
	shown := Wrap(sentinel, `agent "x" not found`)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"bare", New("give a name"), "give a name"},
		{"formatted", Errorf("at most %d bytes", 1000), "at most 1000 bytes"},
		{"wrapped once", fmt.Errorf("store: %w", shown), `agent "x" not found`},
		{"wrapped twice", fmt.Errorf("policy: decide approval a1: %w", fmt.Errorf("store: %w", shown)), `agent "x" not found`},
		{"joined", errors.Join(errors.New("SELECT failed"), fmt.Errorf("store: %w", shown)), `agent "x" not found`},
		{"outermost wins", fmt.Errorf("x: %w", Wrap(fmt.Errorf("y: %w", shown), "the change was refused")), "the change was refused"},
		{"not for people", fmt.Errorf("store: query: %w", errors.New("near \"SELEC\": syntax error")), "try again"},
		{"nil", nil, "try again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Message(tt.err, "try again"); got != tt.want {
				t.Errorf("Message: got %q; want %q", got, tt.want)
			}
			e, ok := As(tt.err)
			if ok != (tt.want != "try again") {
				t.Fatalf("As: got ok %v; want %v", ok, !ok)
			}
			if ok && e.Error() != tt.want {
				t.Errorf("As: got %q; want %q", e.Error(), tt.want)
			}
		})
	}
}

// TestWrapKeepsCause: errors.Is and errors.As reach the cause through an
// *Error, whose message never holds the cause's text.
func TestWrapKeepsCause(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/var/lib/postern/master.key", Err: fs.ErrNotExist}
	err := fmt.Errorf("store: %w", Wrap(cause, "the master key cannot be read"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(err, fs.ErrNotExist): got false; want true")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe != cause {
		t.Errorf("errors.As(err, *fs.PathError): got %v; want the cause", pe)
	}
	if got, want := Message(err, ""), "the master key cannot be read"; got != want {
		t.Errorf("Message: got %q; want %q", got, want)
	}
	if got, want := err.Error(), "store: the master key cannot be read"; got != want {
		t.Errorf("Error: got %q; want %q", got, want)
	}
}
