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
		fixed   string
		base    string
		in      string
		want    location
		wantErr string
	}{
		{name: "root", base: "/", in: "/", want: location{}},
		{name: "empty is the start directory", base: "/", in: "", want: location{}},
		{name: "dot", base: "/", in: ".", want: location{}},
		{name: "alias dir", base: "/", in: "/web", want: location{"web", "/"}},
		{name: "alias dir trailing slash", base: "/", in: "/web/", want: location{"web", "/"}},
		{name: "inside alias", base: "/", in: "/web/etc/hosts", want: location{"web", "/etc/hosts"}},
		{name: "relative", base: "/", in: "web/etc", want: location{"web", "/etc"}},
		{name: "dotdot to another alias", base: "/", in: "/web/../other/x", want: location{"other", "/x"}},
		{name: "dotdot above root", base: "/", in: "/../../web/x", want: location{"web", "/x"}},
		{name: "dotdot to root", base: "/", in: "/web/..", want: location{}},
		{name: "dotdot inside alias", base: "/", in: "/web/a/../../web/b", want: location{"web", "/b"}},
		{name: "doubled slashes", base: "/", in: "//web//a//b/", want: location{"web", "/a/b"}},
		{name: "relative dotdot", base: "/", in: "../web/x", want: location{"web", "/x"}},
		{name: "fixed absolute", fixed: "web", base: "/home/u", in: "/etc/hosts", want: location{"web", "/etc/hosts"}},
		{name: "fixed relative from home", fixed: "web", base: "/home/u", in: "f.txt", want: location{"web", "/home/u/f.txt"}},
		{name: "fixed empty is home", fixed: "web", base: "/home/u", in: "", want: location{"web", "/home/u"}},
		{name: "fixed dotdot stops at root", fixed: "web", base: "/home/u", in: "../../../../x", want: location{"web", "/x"}},
		{name: "fixed root", fixed: "web", base: "/home/u", in: "/..", want: location{"web", "/"}},
		{name: "NUL", base: "/", in: "/web/a\x00b", wantErr: "control byte 0x00"},
		{name: "newline", base: "/", in: "/web/a\nb", wantErr: "control byte 0x0a"},
		{name: "DEL", base: "/", in: "/web/a\x7fb", wantErr: "control byte 0x7f"},
		{name: "too long", base: "/", in: long, wantErr: "longer than"},
		{name: "too long after joining the base", fixed: "web", base: "/" + strings.Repeat("h", MaxPathLen-2), in: "abc", wantErr: "longer than"},
		{name: "non-UTF-8 is a valid name", base: "/", in: "/web/\xff\xfe", want: location{"web", "/\xff\xfe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapPath(tt.fixed, tt.base, tt.in)
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
		fixed   string
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
		{name: "fixed absolute", fixed: "web", alias: "web", in: "/etc//hosts", want: "/etc/hosts"},
		{name: "empty", alias: "web", in: "", wantErr: "empty"},
		{name: "NUL", alias: "web", in: "a\x00", wantErr: "control byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mapLinkTarget(tt.fixed, tt.alias, tt.in)
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
		fixed, alias, in, want string
	}{
		{"", "web", "/etc/hosts", "/web/etc/hosts"},
		{"", "web", "/", "/web"},
		{"", "web", "../x", "../x"},
		{"web", "web", "/etc/hosts", "/etc/hosts"},
	}
	for _, tt := range tests {
		if got := agentLinkTarget(tt.fixed, tt.alias, tt.in); got != tt.want {
			t.Errorf("agentLinkTarget(%q, %q, %q) = %q; want %q", tt.fixed, tt.alias, tt.in, got, tt.want)
		}
	}
}

// FuzzMapPath checks that no path the agent sends makes mapPath panic, give
// two answers, or leave the alias its cleaned form names.
func FuzzMapPath(f *testing.F) {
	for _, s := range []string{"/", "", ".", "..", "/web/../db/x", "web/../../x", "/web/a\x00", "//a//b/..", "/../..", strings.Repeat("../", 2000)} {
		f.Add("", s)
		f.Add("web", s)
	}
	f.Fuzz(func(t *testing.T, fixed, p string) {
		if fixed != "" && (strings.Contains(fixed, "/") || fixed == "." || fixed == "..") {
			t.Skip()
		}
		base := "/"
		if fixed != "" {
			base = "/home/u"
		}
		loc, err := mapPath(fixed, base, p)
		loc2, err2 := mapPath(fixed, base, p)
		if loc != loc2 || (err == nil) != (err2 == nil) {
			t.Fatalf("mapPath(%q) not deterministic: %+v, %v then %+v, %v", p, loc, err, loc2, err2)
		}
		if err != nil {
			return
		}
		if len(p) > MaxPathLen || strings.ContainsAny(p, "\x00\n\r\x7f") {
			t.Fatalf("mapPath(%q) accepted a hostile path", p)
		}
		full := p
		if !path.IsAbs(full) {
			full = base + "/" + full
		}
		clean := path.Clean(full)
		if fixed != "" {
			if loc.Alias != fixed || loc.Path != clean {
				t.Fatalf("mapPath(%q) = %+v; want {%s %s}", p, loc, fixed, clean)
			}
			return
		}
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
		if got := virtualPath(fixed, loc); got != clean {
			t.Fatalf("virtualPath(mapPath(%q)) = %q; want %q", p, got, clean)
		}
	})
}
