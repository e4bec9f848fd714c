package shellclass

import (
	"reflect"
	"testing"
)

// TestIFSSplit pins ifsSplit to what bash 5.2 printed for
// `IFS=$ifs; x=$val; printf '[%s]' $x`.
func TestIFSSplit(t *testing.T) {
	tests := []struct {
		ifs, val string
		want     []string
	}{
		{":", "a::", []string{"a", ""}},
		{":", "a::b:", []string{"a", "", "b"}},
		{":", ":a", []string{"", "a"}},
		{" :", " a : :b  ", []string{"a", "", "b"}},
		{"x", "rmx-rfx/tmp/x", []string{"rm", "-rf", "/tmp/"}},
		{" ", "  a  b  ", []string{"a", "b"}},
		{"", "a b", []string{"a b"}},
		{":", " ", []string{" "}},
		{":", "::", []string{"", ""}},
		{" x", "x x", []string{"", ""}},
		{defaultIFS, "ls\r\v\frm -l", []string{"ls\r\v\frm", "-l"}},
	}
	for _, tt := range tests {
		got, ok := ifsSplit(tt.val, tt.ifs)
		if !ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ifsSplit(%q, IFS=%q) = %q, %v; want %q", tt.val, tt.ifs, got, ok, tt.want)
		}
	}
	if _, ok := ifsSplit("a", "\u00a0"); ok {
		t.Errorf("ifsSplit with a non-ASCII IFS succeeded; want it refused")
	}
}
