// Package fakellmtest starts the fake model provider (internal/fakellm)
// for a test: the setup every test of a model client, the llm capability,
// a loop or a fork would otherwise write again.
package fakellmtest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/fakellm"
)

// Serve parses script, serves it on loopback until tb ends, and returns
// the fake and its server (whose URL is the base; the OpenAI kinds add
// /v1).
func Serve(tb testing.TB, script string) (*fakellm.Server, *httptest.Server) {
	tb.Helper()
	sc, err := fakellm.ParseScript([]byte(script))
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := fakellm.New(sc)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	tb.Cleanup(hs.Close)
	return srv, hs
}

// Settled waits until the fake has recorded the outcome of every request
// (a client can read an answer's last byte before the fake records it),
// and returns its figures.
func Settled(tb testing.TB, srv *fakellm.Server) fakellm.Stats {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := srv.Stats(); st.Settled() {
			return st
		}
		if time.Now().After(deadline) {
			tb.Fatal("the fake never recorded its requests' outcomes")
		}
		time.Sleep(time.Millisecond)
	}
}
