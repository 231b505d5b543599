package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
)

// sinkChildFlag, as the first argument, makes agentrt-bench (or the bench
// test binary) figure 20's OTLP receiver (sinkChild).
const sinkChildFlag = "-otlp-sink"

// otlpSink is an OTLP/HTTP trace receiver on loopback in a process of its
// own, this binary re-executed with sinkChildFlag, that reads every export
// request whole and drops it: the exporter's work (batching, encoding, its
// side of the HTTP round trip) is counted in the bench process's CPU, the
// receiver's is not, as a collector in another process would take it. It
// stops when the bench process closes its stdin, or dies.
type otlpSink struct {
	URL   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startOTLPSink() (*otlpSink, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, sinkChildFlag)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the OTLP receiver: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("bench: the OTLP receiver did not start: %q %v", line, err)
	}
	return &otlpSink{URL: strings.TrimSpace(line), cmd: cmd, stdin: stdin}, nil
}

// requests returns how many export requests the receiver has read.
func (s *otlpSink) requests() (int64, error) {
	resp, err := http.Get(s.URL + "/stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n int64
	if _, err := fmt.Fscan(resp.Body, &n); err != nil {
		return 0, fmt.Errorf("bench: the OTLP receiver's stats: %w", err)
	}
	return n, nil
}

func (s *otlpSink) close() error {
	s.stdin.Close()
	return s.cmd.Wait()
}

// sinkChild is the receiver's process: it prints its URL, serves until
// stdin ends, and returns the exit status.
func sinkChild(stdin io.Reader, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var requests atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, requests.Load())
	})
	go func() {
		err := http.Serve(ln, mux)
		if !errors.Is(err, net.ErrClosed) {
			fmt.Fprintln(stderr, err)
		}
	}()
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, stdin)
	ln.Close()
	return 0
}
