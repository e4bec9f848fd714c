package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Passwords in arguments.
		{"mysql -p attached", "mysql -uroot -pHunter2 shop", "mysql -uroot -p[REDACTED] shop"},
		{"mysqldump -p quoted", "mysqldump -h db -p'se cret' shop > x.sql", "mysqldump -h db -p[REDACTED] shop > x.sql"},
		{"mariadb in pipeline", "cat q.sql | mariadb -pS3cr3t app", "cat q.sql | mariadb -p[REDACTED] app"},
		{"mysql -p then space is a prompt", "mysql -p shop", "mysql -p shop"},
		{"mysql -P port kept", "mysql -P 3306 -h db", "mysql -P 3306 -h db"},
		{"password equals", "psql --password=Hunter2 -h db", "psql --password=[REDACTED] -h db"},
		{"password space", "influx --password Hunter2 -execute 'show databases'", "influx --password [REDACTED] -execute 'show databases'"},
		{"db-password option", "tool --db-password=abc123 run", "tool --db-password=[REDACTED] run"},
		{"api token option", "gh --api-token xyz789 repo list", "gh --api-token [REDACTED] repo list"},
		{"sshpass -p space", "sshpass -p Hunter2 ssh host", "sshpass -p [REDACTED] ssh host"},
		{"sshpass -p attached", "sshpass -pHunter2 ssh host", "sshpass -p[REDACTED] ssh host"},
		// A shell word can join quoted and unquoted parts; the whole word is
		// the secret (found by FuzzRedact: -p""0 left the 0).
		{"mysql -p joined quotes", `mysql -p""Hunter2 shop`, "mysql -p[REDACTED] shop"},
		{"env value joined quotes", "MYSQL_PWD=''Hunter2 mysql shop", "MYSQL_PWD=[REDACTED] mysql shop"},
		{"env value quoted tail", "TOKEN=ab'cd ef' run", "TOKEN=[REDACTED] run"},
		{"assignment inside a harmless value", `X="API_TOKEN=Hunter2 run" sh -c "$X"`, `X="API_TOKEN=[REDACTED] run" sh -c "$X"`},
		{"assignment in a harmless value's open quote", "A='x\nexport DB_PASSWORD='Hunter2'\n", "A='x\nexport DB_PASSWORD=[REDACTED]'\n"},
		{"long option joined quotes", `tool --password="ab"cd run`, "tool --password=[REDACTED] run"},
		// NAME=value.
		{"token env", "GITHUB_TOKEN=abc123 gh pr list", "GITHUB_TOKEN=[REDACTED] gh pr list"},
		{"secret env lower case", "export client_secret=s3cr3t", "export client_secret=[REDACTED]"},
		{"password env quoted", `PGPASSWORD="a b c" psql -h db`, `PGPASSWORD=[REDACTED] psql -h db`},
		{"passwd env", "SMB_PASSWD=x1 smbclient", "SMB_PASSWD=[REDACTED] smbclient"},
		{"_KEY env", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG aws s3 ls", "AWS_SECRET_ACCESS_KEY=[REDACTED] aws s3 ls"},
		{"api_key env", "docker run -e OPENAI_API_KEY=sk-abc img", "docker run -e OPENAI_API_KEY=[REDACTED] img"},
		{"mysql_pwd env", "MYSQL_PWD=pw mysql shop", "MYSQL_PWD=[REDACTED] mysql shop"},
		{"query string token", "curl 'https://x/api?access_token=abc&x=1'", "curl 'https://x/api?access_token=[REDACTED]&x=1'"},
		{"form body password", "curl -d 'user=bob&password=pw1' https://x", "curl -d 'user=bob&password=[REDACTED]' https://x"},
		// Headers and bearer tokens.
		{"authorization bearer", "curl -H 'Authorization: Bearer eyJhbGci.x.y' https://api", "curl -H 'Authorization: Bearer [REDACTED]' https://api"},
		{"authorization basic", `curl -H "authorization: Basic dXNlcjpwYXNz" https://api`, `curl -H "authorization: Basic [REDACTED]" https://api`},
		{"authorization no scheme", "curl -H 'Authorization: abcdef' u", "curl -H 'Authorization: [REDACTED]' u"},
		{"proxy authorization", "curl -H 'Proxy-Authorization: Basic Zm9v' u", "curl -H 'Proxy-Authorization: Basic [REDACTED]' u"},
		{"bare bearer", `echo '{"auth":"Bearer abc.def"}'`, `echo '{"auth":"Bearer [REDACTED]"}'`},
		// URLs.
		{"url password", "git clone https://bob:Hunter2@git.example.com/r.git", "git clone https://bob:[REDACTED]@git.example.com/r.git"},
		{"url password postgres", "psql postgres://app:pw@db:5432/shop", "psql postgres://app:[REDACTED]@db:5432/shop"},
		{"url port only kept", "curl http://host:8080/path", "curl http://host:8080/path"},
		{"url user only kept", "git clone ssh://git@host/r.git", "git clone ssh://git@host/r.git"},
		// Keys.
		{"aws access key", "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE", "aws configure set aws_access_key_id [REDACTED]"},
		{"aws session key", "echo ASIAIOSFODNN7EXAMPLE", "echo [REDACTED]"},
		{"github token", "echo ghp_abcdefghijklmnopqrstuvwxyz0123456789", "echo [REDACTED]"},
		{"pem block", "printf '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\n' > k", "printf '[REDACTED PRIVATE KEY]\n' > k"},
		{"pem openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----", "[REDACTED PRIVATE KEY]"},
		{"pem unterminated", "cat <<EOF\n-----BEGIN PRIVATE KEY-----\nMIIE\nabc", "cat <<EOF\n[REDACTED PRIVATE KEY]"},
		{"public key kept", "echo '-----BEGIN PUBLIC KEY-----'", "echo '-----BEGIN PUBLIC KEY-----'"},
		// Personal identity codes.
		{"hetu 1900s", "grep 131052-308T people.csv", "grep [REDACTED] people.csv"},
		{"hetu 2000s", "echo 010101A123N", "echo " + Redacted},
		{"hetu new century sign", "echo 010594Y9032", "echo " + Redacted},
		{"hetu wrong check kept", "grep 131052-308U people.csv", "grep 131052-308U people.csv"},
		{"hetu bad date kept", "echo 320152-308T", "echo 320152-308T"},
		{"date in file name kept", "ls backup-240101-1234.tar", "ls backup-240101-1234.tar"},
		// Non-secrets.
		{"plain command", "uptime", "uptime"},
		{"mkdir -p", "mkdir -p /srv/app && tar -pxf a.tar", "mkdir -p /srv/app && tar -pxf a.tar"},
		{"ssh -p port", "ssh -p 2222 host", "ssh -p 2222 host"},
		{"PWD env", "PWD=/srv ls", "PWD=/srv ls"},
		{"harmless env", "LANG=C sort -u file", "LANG=C sort -u file"},
		{"password file", "tool --password-file /etc/pw run", "tool --password-file /etc/pw run"},
		{"password stdin", "docker login --password-stdin -u bob", "docker login --password-stdin -u bob"},
		{"no-password", "psql --no-password shop", "psql --no-password shop"},
		{"password then flag", "mysql --password -h db", "mysql --password -h db"},
		{"word token alone", "grep token file.txt", "grep token file.txt"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.in)
			if got != tt.want {
				t.Errorf("Redact(%q)\n got %q;\nwant %q", tt.in, got, tt.want)
			}
			if again := Redact(got); again != got {
				t.Errorf("Redact not idempotent: got %q; want %q", again, got)
			}
		})
	}
}

func TestValidHETU(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"reference example", "131052-308T", true},
		{"wrong check", "131052-308A", false},
		{"individual too low", "131052-001X", false},
		{"month 13", "011352-308T", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := reHETU.FindStringSubmatch(tt.in)
			got := m != nil && validHETU(m[1], m[3], m[4])
			if got != tt.want {
				t.Errorf("validHETU(%q) = %v; want %v", tt.in, got, tt.want)
			}
		})
	}
}

// plantForms are the shapes a secret takes in a command; %s is the secret.
var plantForms = []string{
	"mysql -u root -p%s shop",
	"psql --password=%s",
	"tool --password %s",
	"sshpass -p %s ssh h",
	"sshpass -p%s ssh h",
	"API_TOKEN=%s run",
	"export DB_PASSWORD='%s'",
	"curl -H 'Authorization: Bearer %s' u",
	"curl -H 'Authorization: %s' u",
	"git clone https://u:%s@h/r",
}

// FuzzRedact checks that Redact never panics, is idempotent, and that a
// secret planted in any known form, between arbitrary text, never survives.
func FuzzRedact(f *testing.F) {
	f.Add("ls -la", "", "seed")
	f.Add("mysql -p", "'", "x")
	f.Add("https://a:b@c", "Authorization: x", "y")
	f.Add("-----BEGIN RSA PRIVATE KEY-----", "131052-308T", "z")
	f.Add("TOKEN=\"", "\\", "q")
	f.Fuzz(func(t *testing.T, prefix, suffix, seed string) {
		out := Redact(prefix + seed + suffix)
		if again := Redact(out); again != out {
			t.Fatalf("not idempotent: Redact(%q) = %q; Redact of that = %q", prefix+seed+suffix, out, again)
		}
		// A secret that cannot occur by chance in the surrounding text.
		sum := sha256.Sum256([]byte(seed))
		secret := "Zq" + hex.EncodeToString(sum[:8])
		for _, form := range plantForms {
			in := prefix + "\n" + strings.ReplaceAll(form, "%s", secret) + "\n" + suffix
			if strings.Contains(prefix+suffix, secret) {
				continue
			}
			if out := Redact(in); strings.Contains(out, secret) {
				t.Fatalf("planted secret survived in form %q: got %q", form, out)
			}
		}
	})
}
