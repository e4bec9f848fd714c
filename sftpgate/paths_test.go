package sftpgate

import (
	"path"
	"strings"
	"testing"
)

func TestMapPath(t *testing.T) {
	long := "/web/" + strings.Repeat("a", MaxPathLen)
	tests := []struct {
		name    string
		in      string
		want    location
		wantErr string
	}{
		{name: "root", in: "/", want: location{}},
		{name: "empty is the start directory", in: "", want: location{}},
		{name: "dot", in: ".", want: location{}},
		{name: "alias dir", in: "/web", want: location{"web", "/"}},
		{name: "alias dir trailing slash", in: "/web/", want: location{"web", "/"}},
		{name: "inside alias", in: "/web/etc/hosts", want: location{"web", "/etc/hosts"}},
		{name: "relative", in: "web/etc", want: location{"web", "/etc"}},
		{name: "dotdot to another alias", in: "/web/../other/x", want: location{"other", "/x"}},
		{name: "dotdot above root", in: "/../../web/x", want: location{"web", "/x"}},
		{name: "dotdot to root", in: "/web/..", want: location{}},
		{name: "dotdot inside alias", in: "/web/a/../../web/b", want: location{"web", "/b"}},
		{name: "doubled slashes", in: "//web//a//b/", want: location{"web", "/a/b"}},
		{name: "relative dotdot", in: "../web/x", want: location{"web", "/x"}},
		{name: "NUL", in: "/web/a\x00b", wantErr: "control byte 0x00"},
		{name: "newline", in: "/web/a\nb", wantErr: "control byte 0x0a"},
		{name: "DEL", in: "/web/a\x7fb", wantErr: "control byte 0x7f"},
		{name: "too long", in: long, wantErr: "longer than"},
		{name: "too long once made absolute", in: strings.Repeat("h", MaxPathLen), wantErr: "longer than"},
		{name: "non-UTF-8 is a valid name", in: "/web/\xff\xfe", want: location{"web", "/\xff\xfe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapPath(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "sftpgate: ") {
					t.Fatalf("mapPath(%q) error = %v; want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("mapPath(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("mapPath(%q) = %+v; want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMapLinkTarget(t *testing.T) {
	tests := []struct {
		name    string
		alias   string
		in      string
		want    string
		wantErr string
	}{
		{name: "relative kept as sent", alias: "web", in: "../a/./b", want: "../a/./b"},
		{name: "absolute in alias", alias: "web", in: "/web/etc/hosts", want: "/etc/hosts"},
		{name: "absolute alias dir", alias: "web", in: "/web", want: "/"},
		{name: "absolute dotdot into other alias", alias: "web", in: "/web/../db/x", wantErr: "cannot point at"},
		{name: "absolute other alias", alias: "web", in: "/db/x", wantErr: "cannot point at"},
		{name: "virtual root", alias: "web", in: "/", wantErr: "cannot point at"},
		{name: "empty", alias: "web", in: "", wantErr: "empty"},
		{name: "NUL", alias: "web", in: "a\x00", wantErr: "control byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapLinkTarget(tt.alias, tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("mapLinkTarget(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("mapLinkTarget(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestAgentLinkTarget(t *testing.T) {
	tests := []struct {
		alias, in, want string
	}{
		{"web", "/etc/hosts", "/web/etc/hosts"},
		{"web", "/", "/web"},
		{"web", "../x", "../x"},
		{"web", "/a//b/../c", "/web/a/c"},
	}
	for _, tt := range tests {
		if got := agentLinkTarget(tt.alias, tt.in); got != tt.want {
			t.Errorf("agentLinkTarget(%q, %q) = %q; want %q", tt.alias, tt.in, got, tt.want)
		}
	}
}

// FuzzMapPath checks that no path the agent sends makes mapPath panic, give
// two answers, or leave the alias its cleaned form names.
func FuzzMapPath(f *testing.F) {
	for _, s := range []string{"/", "", ".", "..", "/web/../db/x", "web/../../x", "/web/a\x00", "//a//b/..", "/../..", strings.Repeat("../", 2000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		loc, err := mapPath(p)
		loc2, err2 := mapPath(p)
		if loc != loc2 || (err == nil) != (err2 == nil) {
			t.Fatalf("mapPath(%q) not deterministic: %+v, %v then %+v, %v", p, loc, err, loc2, err2)
		}
		if err != nil {
			return
		}
		if len(p) > MaxPathLen || strings.ContainsAny(p, "\x00\n\r\x7f") {
			t.Fatalf("mapPath(%q) accepted a hostile path", p)
		}
		clean := path.Clean("/" + p)
		if loc.Alias == "" {
			if clean != "/" || loc.Path != "" {
				t.Fatalf("mapPath(%q) = %+v; want the root only for %q", p, loc, clean)
			}
			return
		}
		if !path.IsAbs(loc.Path) || path.Clean(loc.Path) != loc.Path {
			t.Fatalf("mapPath(%q) = %+v: target path not absolute and clean", p, loc)
		}
		if strings.Contains(loc.Alias, "/") || loc.Alias == "." || loc.Alias == ".." {
			t.Fatalf("mapPath(%q) = %+v: bad alias", p, loc)
		}
		if first, _, _ := strings.Cut(clean[1:], "/"); first != loc.Alias {
			t.Fatalf("mapPath(%q) = %+v: alias is not the first element of %q", p, loc, clean)
		}
		if got := virtualPath(loc); got != clean {
			t.Fatalf("virtualPath(mapPath(%q)) = %q; want %q", p, got, clean)
		}
	})
}
