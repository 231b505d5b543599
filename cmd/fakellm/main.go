// Command fakellm serves a scripted fake model provider (OpenAI Chat
// Completions, OpenAI Responses, Anthropic Messages) on a loopback
// address until it is stopped, for the demo, the crash tests and the
// benchmarks. Run `fakellm --help`; the script format is in the
// internal/fakellm package comment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentrt/agentrt/internal/fakellm"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil)) }

const usage = `usage: fakellm --script FILE [--listen 127.0.0.1:0]

fakellm is a fake model provider for tests: a real HTTP server that
answers OpenAI Chat Completions (POST /v1/chat/completions), OpenAI
Responses (POST /v1/responses, GET /v1/responses/{id}) and Anthropic
Messages (POST /v1/messages), streamed and not, from the turns of a
script, and counts what it is sent (GET /_fake/stats).

It prints its base URL (http://HOST:PORT) as the first line of standard
output once it listens, and serves until it gets SIGINT or SIGTERM (or
is killed). Point a client at that URL plus /v1.

A script (YAML or JSON):

  api_key: sk-fake            # required, as Authorization: Bearer or x-api-key
  turns:
    - expect: {model: gpt-test, last_role: user}
      reply:
        text: "Hello there"
        chunks: 3              # streamed in 3 pieces
      usage: {input_tokens: 12, output_tokens: 3, cache_read_tokens: 4}
      faults: [{status: 429, retry_after: 1s}]   # the first attempt gets 429
    - reply:
        tool_calls: [{name: fetch, arguments: {url: "http://example.test"}}]

Flags:
`

// run is the command: it returns the exit code. It serves until a signal
// or until stop (nil in main) is closed.
func run(args []string, stdout, stderr io.Writer, stop <-chan struct{}) int {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback `address` to listen on (port 0 picks a free one)")
	scriptFile := fs.String("script", "", "the script `FILE` (YAML or JSON)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return fail(stderr, err, "run fakellm --help")
	}
	if fs.NArg() > 0 {
		return fail(stderr, fmt.Errorf("unexpected argument %q", fs.Arg(0)), "fakellm takes flags only: fakellm --script FILE")
	}
	if *scriptFile == "" {
		return fail(stderr, errors.New("--script is required"), "write the turns in a YAML file and pass --script FILE (fakellm --help shows one)")
	}
	doc, err := os.ReadFile(*scriptFile)
	if err != nil {
		return fail(stderr, err, "check the --script path")
	}
	script, err := fakellm.ParseScript(doc)
	if err != nil {
		return fail(stderr, fmt.Errorf("%s: %w", *scriptFile, err), "fix the script; its format is in fakellm --help")
	}
	srv, err := fakellm.New(script)
	if err != nil {
		return fail(stderr, err, "fix the script")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fail(stderr, fmt.Errorf("--listen %q: %v", *listen, err), "give HOST:PORT, such as 127.0.0.1:0")
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		// The script's key is no secret: a fake reachable from other
		// machines would answer anyone who read it.
		return fail(stderr, fmt.Errorf("--listen %q is not a loopback address", *listen), "listen on 127.0.0.1 or [::1]")
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(stderr, err, "pick another port, or port 0 for a free one")
	}
	fmt.Fprintf(stdout, "http://%s\n", l.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return fail(stderr, err, "")
	case <-sig:
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hs.Shutdown(ctx)
	return 0
}

// fail prints err the way the project's commands do, with a hint when
// one is known, and returns the exit code 1.
func fail(stderr io.Writer, err error, hint string) int {
	fmt.Fprintf(stderr, "fakellm: error: %v\n", err)
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return 1
}
