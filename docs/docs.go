// Package docs holds the documents the binary serves. OpenAPI is the
// OpenAPI 3.1 description of the HTTP API (openapi.yaml); `make test`
// checks every /v1 route's requests and answers against it.
package docs

import _ "embed"

// OpenAPI is openapi.yaml, as written.
//
//go:embed openapi.yaml
var OpenAPI []byte
