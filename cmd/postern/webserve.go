package main

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/recipes"
	"github.com/postern/postern/web"
)

// defaultDemoHTTPListen is where the demo serves its web page; serve has no
// web page unless --http-listen is given.
const defaultDemoHTTPListen = "127.0.0.1:8443"

// webFlags are the flags of the admin web page, shared by serve and demo.
type webFlags struct {
	listen    string
	certFile  string
	keyFile   string
	publicURL string
}

func addWebFlags(cmd *cobra.Command, defListen string) *webFlags {
	f := &webFlags{}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "http-listen", defListen,
		"address of the admin web page and REST API, HTTPS only (empty: none; port 0 picks a free port)")
	fl.StringVar(&f.certFile, "tls-cert", "",
		"TLS certificate (PEM) of the web page; without it and --tls-key a self-signed one is made in the data directory")
	fl.StringVar(&f.keyFile, "tls-key", "", "TLS private key (PEM) for --tls-cert")
	fl.StringVar(&f.publicURL, "public-url", "",
		"base URL admins reach the web page at, for links (default https://HTTP-LISTEN-ADDRESS)")
	return f
}

// check validates the web flags as usage errors (exit 2) and returns the
// public URL with no trailing slash, "" when it is to follow the listener.
func (f *webFlags) check(cmd *cobra.Command) (string, error) {
	p := cmdPath(cmd)
	if f.listen == "" {
		for _, name := range []string{"tls-cert", "tls-key", "public-url"} {
			if cmd.Flags().Changed(name) {
				return "", usagef("%s: --%s needs --http-listen", p, name)
			}
		}
		return "", nil
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return "", usagef("%s: --http-listen %q: want HOST:PORT", p, f.listen)
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return "", usagef("%s: give both --tls-cert and --tls-key, or neither for a self-signed certificate", p)
	}
	if f.publicURL == "" {
		return "", nil
	}
	u, err := url.Parse(f.publicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", usagef("%s: --public-url %q: want an absolute URL such as https://bastion.example.com:8443", p, f.publicURL)
	}
	return strings.TrimSuffix(f.publicURL, "/"), nil
}

// webParams is what runBastion needs to serve the web page beside the
// bastion; nil serves none.
type webParams struct {
	Listener net.Listener // runBastion owns it from here on
	Cert     *web.Certificate
	URL      string // public base URL, no trailing slash
	Catalog  *recipes.Catalog
}

// loadWeb loads what the web page on ln needs: the certificate (the one
// f names, else the data directory's self-signed one, made on first use)
// and the recipe catalog. The caller keeps ln until runBastion takes it.
func loadWeb(ln net.Listener, f *webFlags, publicURL, dataDir string, now time.Time) (*webParams, error) {
	cert, err := web.LoadCertificate(dataDir, f.certFile, f.keyFile, now)
	if err != nil {
		return nil, err
	}
	cat, err := recipes.Load()
	if err != nil {
		return nil, err
	}
	if publicURL == "" {
		publicURL = listenerURL(ln)
	}
	return &webParams{Listener: ln, Cert: cert, URL: publicURL, Catalog: cat}, nil
}

// listenerURL is https://HOST:PORT of a listener, reached on loopback when
// it listens on every address.
func listenerURL(ln net.Listener) string {
	host, port := dialableAddr(ln.Addr().(*net.TCPAddr))
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// webApproveHint is the bastion's waiting line when the web page is on: the
// approval's page. The line goes to an untrusted agent, so it names no
// path of the bastion's binary or data directory.
func webApproveHint(baseURL string) func(id string) string {
	return func(id string) string {
		return "an admin decides at " + baseURL + "/approvals/" + id
	}
}

// cliApproveHint is the bastion's waiting line without the web page.
func cliApproveHint(id string) string { return "an admin decides it with postern approvals" }

// errWebStopped is serving's error when the web page stopped on its own.
var errWebStopped = errors.New("web: stopped without being asked to")
