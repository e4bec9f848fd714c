package shellclass

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestZZTry(t *testing.T) {
	f := os.Getenv("TRY")
	if f == "" {
		t.Skip()
	}
	b, _ := os.ReadFile(f)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		term := strings.HasPrefix(l, "T:")
		l = strings.TrimPrefix(l, "T:")
		r := Classify(l, Options{Terminal: term})
		why := ""
		if len(r.Reasons) > 0 {
			why = r.Reasons[0].Why
		}
		fmt.Printf("%-12s %s   # %s\n", r.Class, l, why)
	}
}
