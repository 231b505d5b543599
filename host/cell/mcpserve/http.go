package mcpserve

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerDomain separates the HTTP bearer's derivation from the client's
// id, both hashes of the token.
const bearerDomain = "agentrt-mcp-serve-http\x00"

// Bearer returns the secret an HTTP client sends as Authorization: Bearer:
// the hex SHA-256 of bearerDomain and the client's token, which only a
// holder of the token can compute, and which reveals nothing of it.
func Bearer(token []byte) string {
	h := sha256.New()
	h.Write([]byte(bearerDomain))
	h.Write(token)
	return hex.EncodeToString(h.Sum(nil))
}

// CheckListen refuses an address that is not a loopback IP and port: the
// server is never reachable beyond this machine.
func CheckListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %v (give 127.0.0.1:PORT)", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--http %q: not a loopback address; the MCP server listens on 127.0.0.1 or [::1] only", addr)
	}
	return nil
}

// Handler serves the client's tools over streamable HTTP. Every request
// passes, before the MCP handler sees it: no Origin header and no
// Sec-Fetch-Site other than none (a browser's page cannot drive it), a Host
// that is loopback (the go-sdk's DNS-rebinding protection), and the
// client's bearer (Bearer), compared in constant time.
func (s *Server) Handler(version string) http.Handler {
	srv := s.MCP(version)
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	want := []byte("Bearer " + Bearer(s.token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" || (r.Header.Get("Sec-Fetch-Site") != "" && r.Header.Get("Sec-Fetch-Site") != "none") {
			http.Error(w, "cross-origin requests are refused", http.StatusForbidden)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "the client's bearer is required (agentrt mcp serve prints it)", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})
}
