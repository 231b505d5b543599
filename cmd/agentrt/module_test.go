package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestSubmitByHashSendsTheModuleOnce: agentrt run, talking to a daemon,
// sends a module's bytes with the first submission only; the next carry
// its hash, which the daemon runs without compiling again.
func TestSubmitByHashSendsTheModuleOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := cell.Open(ctx, dir, cell.Options{NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := cell.NewServer(c, cell.ServerOptions{Logf: t.Logf})
	c.AddSink(srv.Sink)
	sock := filepath.Join(dir, cell.SocketName)
	ln, err := cell.ListenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := srv.Endpoint(ln)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sizes []int64 // of each POST /v1/runs body
	inner := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/runs" {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			sizes = append(sizes, int64(len(body)))
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		inner.ServeHTTP(w, r)
	})
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		srv.Shutdown(ctx)
		c.Close(ctx)
	})
	cl, err := cell.Dial("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	sum := sha256.Sum256(code)
	for i := range 3 {
		st, err := submitByHash(ctx, cl, cell.Submission{Module: code, Name: "loop.wasm"})
		if err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
		var end *cell.RunInfo
		for end == nil {
			l, err := st.Next()
			if err != nil {
				t.Fatalf("submission %d: %v", i, err)
			}
			end = l.End
		}
		st.Close()
		if end.Status != journal.StatusCompleted || end.ModuleSHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("run %d: %+v", i, end)
		}
	}
	if len(sizes) != 3 || sizes[0] < int64(len(code)) || sizes[1] >= int64(len(code)) || sizes[2] >= 512 {
		t.Fatalf("submission bodies of %v bytes, want the first over the module's %d and the next two small", sizes, len(code))
	}
	if st := c.Engine.Stats(); st.Compiles != 1 || st.Hits != 2 {
		t.Fatalf("the daemon compiled %d times (%d hits), want once", st.Compiles, st.Hits)
	}
}
