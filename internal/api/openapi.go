package api

import (
	_ "embed"
	"net/http"
	"slices"
	"strconv"
)

// openapiYAML is the OpenAPI 3.0 document of the API, written by hand:
// openapi_test.go checks it against Routes() and real responses.
//
//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the OpenAPI 3.0 document (YAML) that the daemon serves at
// GET /api/v1/openapi.yaml.
func OpenAPI() []byte { return slices.Clone(openapiYAML) }

// serveOpenAPI answers with the OpenAPI document; it never asks for a token.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(openapiYAML)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openapiYAML)
}
