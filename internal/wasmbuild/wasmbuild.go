// Package wasmbuild compiles agents to wasip1 modules, reproducibly: the
// same source and toolchain give the same bytes, and so the same module hash
// in every run header. Go agents are built with the go command, C agents
// with clang against wasi-libc.
package wasmbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoGo is returned when the go command is not on PATH.
var ErrNoGo = errors.New("the go command is not on PATH (agentrt build compiles Go agents with it)")

// Go builds the main package in dir to out as a wasip1 module.
func Go(ctx context.Context, dir, out string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return ErrNoGo
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-buildvcs=false", "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
