// Package httpx holds what every HTTP endpoint of promlib shares: the JSON
// error body {"error":{"code":"...","msg":"..."}}, the response headers of
// a JSON answer, and reading a request body within a size limit.
//
// # Why internal/
//
// It is in internal/ and not below one package because the policies
// (auth), the HTTP edges (replay, ops), the gateway (ws) and the programs
// (cmd/promctl, examples/hub) all use it.
package httpx
