//go:build !linux && !darwin && !windows

package sandbox

import "context"

func launch(context.Context, *Spec, []string, *options) (*Result, error) {
	return nil, ErrUnsupported
}

// Check returns ErrUnsupported: this platform has no sandbox backend.
func Check(...Option) (*Report, error) { return nil, ErrUnsupported }
