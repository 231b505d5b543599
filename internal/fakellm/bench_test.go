package fakellm_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The fake's own cost, the floor under a benchmark that times a client
// against it: one non-streamed chat call and one streamed Messages call
// of 8 chunks over loopback, with a keep-alive connection.
func BenchmarkRoundTrip(b *testing.B) {
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`},
		{"messages-stream", "/v1/messages", `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			_, url := start(b, strings.Replace(twoTurns, "chunks: 5", "chunks: 8", 1))
			for b.Loop() {
				req, _ := http.NewRequestWithContext(context.Background(), "POST", url+c.path, strings.NewReader(c.body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("anthropic-version", "2023-06-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.Status)
				}
			}
		})
	}
}
