package server

import (
	"embed"
	"fmt"
	"mistralrs/internal/observe"
	"net/http"
	"path"
)

// openapiJSON is the OpenAPI 3 document of every route in routeTable (a
// test keeps the two equal).
//
//go:embed openapi.json
var openapiJSON []byte

// swaggerUI holds the vendored Swagger UI (see swaggerui/README.md).
//
//go:embed swaggerui/swagger-ui-bundle.js swaggerui/swagger-ui.css swaggerui/LICENSE swaggerui/NOTICE swaggerui/swagger-ui-bundle.js.LICENSE.txt
var swaggerUI embed.FS

// docsPage loads Swagger UI from /docs/ and points it at the OpenAPI document.
const docsPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mistralrs API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({url: "/api-doc/openapi.json", dom_id: "#swagger-ui", deepLinking: true});
</script>
</body>
</html>
`

// handleDocs is GET /docs: the Swagger UI page.
func handleDocs(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(docsPage))
}

// docsTypes are the files under /docs/ and their content types.
var docsTypes = map[string]string{
	"swagger-ui-bundle.js":             "text/javascript; charset=utf-8",
	"swagger-ui.css":                   "text/css; charset=utf-8",
	"LICENSE":                          "text/plain; charset=utf-8",
	"NOTICE":                           "text/plain; charset=utf-8",
	"swagger-ui-bundle.js.LICENSE.txt": "text/plain; charset=utf-8",
}

// handleDocsFile is GET /docs/{file...}: the page itself for "/docs/", else
// one of the vendored files.
func handleDocsFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "" || name == "index.html" {
		handleDocs(w, r)
		return
	}
	ct, ok := docsTypes[name]
	data, err := swaggerUI.ReadFile(path.Join("swaggerui", name))
	if !ok || err != nil {
		observe.WriteErrorMessage(w, r, http.StatusNotFound, fmt.Sprintf("no file %q under /docs", name))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(data)
}

// handleOpenAPI is GET /api-doc/openapi.json.
func handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiJSON)
}
