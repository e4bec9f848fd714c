package policy

import (
	"strings"
	"testing"
)

func TestExtentOf(t *testing.T) {
	long := strings.Repeat("A", 6000)
	tests := []struct {
		name   string
		text   string
		want   Extent
		beyond string
		whole  string
	}{
		{"empty", "", Extent{}, "", "0 lines, 0 bytes"},
		{"one short line", "uptime", Extent{Lines: 1, Bytes: 6}, "", "1 line, 6 bytes"},
		{"twelve lines fit", strings.Repeat("x\n", 11) + "x", Extent{Lines: 12, Bytes: 23}, "", "12 lines, 23 bytes"},
		{"true, 60 newlines, touch", "true" + strings.Repeat("\n", 60) + "touch /tmp/x",
			Extent{Lines: 61, Bytes: 76, MoreLines: 49, MoreBytes: 76 - len("true\n") - 11},
			"49 more lines, 60 more bytes", "61 lines, 76 bytes"},
		{"6,000 bytes on one line", "echo " + long + "; touch /tmp/x",
			Extent{Lines: 1, Bytes: 6019, MoreBytes: 6019 - 960},
			"5,059 more bytes", "1 line, 6,019 bytes"},
		{"a long line cut by the last row", strings.Repeat("x\n", 11) + strings.Repeat("y", 200) + "\nz",
			Extent{Lines: 13, Bytes: 22 + 200 + 2, MoreLines: 1, MoreBytes: 224 - 22 - 80},
			"1 more line, 122 more bytes", "13 lines, 224 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExtentOf(tt.text)
			if got != tt.want {
				t.Errorf("ExtentOf = %#v; want %#v", got, tt.want)
			}
			if got.Beyond() != tt.beyond || got.String() != tt.whole {
				t.Errorf("Beyond %q, String %q; want %q, %q", got.Beyond(), got.String(), tt.beyond, tt.whole)
			}
		})
	}
}
