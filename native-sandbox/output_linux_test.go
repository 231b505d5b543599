//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWithOutputStreams: WithOutput passes every byte of the tool's
// stdout to the stream as it comes, and the Result still holds its
// first Limits.Output bytes, cut as the cap says.
func TestWithOutputStreams(t *testing.T) {
	spec := &Spec{Limits: Limits{Wall: 20 * time.Second, Output: 4}}
	for _, p := range []string{"/usr", "/lib", "/lib64", "/bin"} {
		if _, err := os.Lstat(p); err == nil {
			spec.ReadOnly = append(spec.ReadOnly, p)
		}
	}
	var stream bytes.Buffer
	res, err := Launch(context.Background(), spec, []string{"/usr/bin/cat"},
		WithStdin(strings.NewReader("streamed through")), WithOutput(&stream, nil))
	if err != nil {
		t.Fatal(err)
	}
	if stream.String() != "streamed through" {
		t.Errorf("the stream got %q, want all of stdin", stream.String())
	}
	if string(res.Stdout) != "stre" || !res.StdoutTruncated {
		t.Errorf("the result holds %q (truncated %v), want the first 4 bytes, cut", res.Stdout, res.StdoutTruncated)
	}
}
