// Package console is tidemark's web console: static files embedded in the
// binary and served by the daemon under /ui/. The console is a client of
// the API like the CLI is; it holds no state of its own and no secrets (a
// token the user types stays in the browser tab's session storage).
package console

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"
)

//go:embed static
var files embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// Files is the console's file tree, index.html at its root.
func Files() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// Handler serves the console under Prefix. Every response forbids inline
// script and framing: the pages build their DOM from API data with
// textContent, never as markup.
func Handler() http.Handler {
	fsrv := http.StripPrefix(Prefix, http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary: a browser revalidates each one
		// by its entity tag and gets 304 while it is the same.
		h.Set("Cache-Control", "no-cache")
		if msg := badPath(r.URL.Path); msg != "" {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html" // an explicit /ui/index.html is redirected to /ui/ by the file server
		} else if name == "index.html" || strings.HasSuffix(name, "/index.html") {
			name = ""
		}
		if name != "" && serveAsset(w, r, name) {
			return
		}
		fsrv.ServeHTTP(w, r)
	})
}

// maxPath bounds a console path; the longest file name is far shorter.
const maxPath = 1024

// badPath says why a request path cannot name a console file, or "" when
// it can. The file server would answer such paths 500 (invalid UTF-8, as in
// the overlong encoding %c0%ae of ".") or look them up for nothing.
func badPath(p string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(p, Prefix), "/")
	switch {
	case len(p) > maxPath:
		return fmt.Sprintf("bad console path: longer than %d bytes", maxPath)
	case !utf8.ValidString(name):
		return "bad console path: not UTF-8"
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return "bad console path: control characters or backslashes"
	case name != "" && !fs.ValidPath(name):
		return "bad console path: empty, . or .. elements"
	}
	return ""
}
