//go:build unix

package main

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/host"
	"github.com/creack/pty"
)

// TestAnswerTypedAsThePromptAppearsIsTaken: an answer typed the moment
// the prompt shows is the answer; only what was typed before the prompt
// is dropped (the prompt used to drop typed-ahead input after it was
// shown, so an answer typed at once could be dropped with it and the run
// waited for ever: TestApprovalPromptOnTheControllingTerminal hung so in
// CI). Many prompts in a row, each answered as soon as it is seen, on
// one P, where the typist's goroutine runs as soon as the prompt is
// written (it failed at its third prompt with the old order).
func TestAnswerTypedAsThePromptAppearsIsTaken(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	a := &termApprover{in: tty, out: tty, who: "terminal:test"}
	const prompts = 100
	seen := make(chan struct{}, prompts)
	go func() {
		buf := make([]byte, 4096)
		var got strings.Builder
		n := 0
		for n < prompts {
			k, err := master.Read(buf)
			if err != nil {
				return
			}
			got.Write(buf[:k])
			for strings.Count(got.String(), "allow it? [y/N] ") > n {
				n++
				master.Write([]byte("y\n")) // at once
				seen <- struct{}{}
			}
		}
	}()
	for i := range prompts {
		type answer struct {
			ok  bool
			err error
		}
		done := make(chan answer, 1)
		go func() {
			ok, _, err := a.Approve(context.Background(), host.Approval{Op: "kv.put", Resource: "h", Step: uint64(i + 1), Rule: "ask"})
			done <- answer{ok, err}
		}()
		select {
		case r := <-done:
			if r.err != nil || !r.ok {
				t.Fatalf("prompt %d: approved %v, %v; want the y typed as it appeared", i+1, r.ok, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("prompt %d: the y typed as it appeared was dropped (still waiting after 10 s)", i+1)
		}
	}
}
