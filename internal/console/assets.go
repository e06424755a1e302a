package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// asset is one console file ready to serve: as it is and gzipped, each
// with an entity tag of its content, so that a browser revalidates with
// If-None-Match and gets 304 instead of the file again.
type asset struct {
	ctype       string
	plain, gz   []byte
	etag, gzTag string
}

var (
	assetsOnce sync.Once
	assets     map[string]*asset
)

// loadAssets reads and compresses every console file once.
func loadAssets() map[string]*asset {
	assetsOnce.Do(func() {
		assets = map[string]*asset{}
		err := fs.WalkDir(Files(), ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := fs.ReadFile(Files(), name)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(body)
			tag := hex.EncodeToString(sum[:12])
			var gz bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
			zw.Write(body)
			zw.Close()
			ctype := mime.TypeByExtension(path.Ext(name))
			if ctype == "" {
				ctype = http.DetectContentType(body)
			}
			assets[name] = &asset{ctype: ctype, plain: body, gz: gz.Bytes(), etag: `"` + tag + `"`, gzTag: `"` + tag + `-gz"`}
			return nil
		})
		if err != nil {
			panic(err) // the files are embedded in the binary
		}
	})
	return assets
}

// serveAsset answers a request for a console file from memory, gzipped
// when the client takes it; false when name is not one (the file server
// then answers: directories, redirects, 404s).
func serveAsset(w http.ResponseWriter, r *http.Request, name string) bool {
	a := loadAssets()[name]
	if a == nil {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Add("Vary", "Accept-Encoding")
	body, tag := a.plain, a.etag
	if acceptsGzip(r) && len(a.gz) < len(a.plain) {
		body, tag = a.gz, a.gzTag
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", tag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
	return true
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, h := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(h, ",") {
			enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}
