//go:build !wasmtime || !cgo

package host

import (
	"context"
	"fmt"
)

const wasmtimeBuilt = false

// newWasmtime is what a build without the tag wasmtime, or without cgo,
// has of wasmtime: an error that says how to get it.
func newWasmtime(context.Context, EngineConfig) (wasmRuntime, error) {
	return nil, fmt.Errorf("host: engine %q: %w: build with the tag wasmtime and cgo: CGO_ENABLED=1 go build -tags wasmtime", EngineWasmtime, ErrEngineUnavailable)
}
