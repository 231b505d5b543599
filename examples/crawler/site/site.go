// Package site serves the small web site the crawler example crawls: a
// handful of linked pages about durable execution, a broken link and a link
// to a host outside the crawler's grant. Responses carry no Date header, so
// two crawls of the site see byte-identical answers.
package site

import (
	"fmt"
	"net/http"
	"strings"
)

var pages = map[string]string{
	"/": page("Home", `Welcome to the durable agents handbook. Agents that survive crashes keep a journal.
		Read about <a href="/journal">the journal</a>, <a href="/replay">replay</a> and
		<a href="/effects">effects</a>. There is also <a href="/missing">a page that went away</a>.`),
	"/journal": page("Journal", `Every import call is written to the journal before its effect happens.
		The journal is a hash chain: each entry names the hash of the entry before it, and the cell signs the head.
		See <a href="/replay">replay</a> and <a href="/signatures">signatures</a>.`),
	"/replay": page("Replay", `Replay feeds recorded results back to the agent. A replay that asks a different
		question diverges, and the journal says at which step. Back to <a href="/">home</a>; on to <a href="/audit">audit</a>.`),
	"/effects": page("Effects", `An effect changes the world: an HTTP request, a write to durable state.
		Effects carry an idempotency key so a server can drop a repeated request.
		Compare <a href="/journal">the journal</a>. Outside reading: <a href="http://example.com/durable">example.com</a>.`),
	"/signatures": page("Signatures", `Each commit is signed with the cell's ed25519 key. A verifier checks that every entry
		is covered by a signed head of a trusted cell. See <a href="/audit">audit</a>.`),
	"/audit": page("Audit", `An auditor re-executes the run from its journal and checks every hash and signature,
		offline, with nothing but the bundle and the trusted keys. Back to <a href="/">home</a>.`),
}

func page(title, body string) string {
	return fmt.Sprintf("<!doctype html>\n<html><head><title>%s</title></head><body><h1>%s</h1><p>%s</p></body></html>\n", title, title, body)
}

// Handler serves the site.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		body, ok := pages[r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintln(w, "not found")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.ReplaceAll(body, "\t", ""))
	})
}

// Pages returns the number of pages the site serves.
func Pages() int { return len(pages) }
