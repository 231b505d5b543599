package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/journal"
)

// ErrUnknownModule is returned by Start for a run that names its module
// by hash (RunSpec.ModuleSHA256) when the cell's store does not hold that
// module. It wraps journal.ErrNotFound.
var ErrUnknownModule = fmt.Errorf("module not stored in this cell: %w", journal.ErrNotFound)

// ErrModuleMismatch is returned by Start for a run that gives both its
// module's bytes and a hash they do not have.
var ErrModuleMismatch = errors.New("the module's bytes do not have the SHA-256 given for them")

// ModuleHaver is a store that tells whether it holds a module without
// reading it; the host uses it, when its store is one, to start a run of
// a module compiled already without reading the module back.
type ModuleHaver interface {
	HasModule(ctx context.Context, sha256 []byte) (bool, error)
}

// PutModule checks, compiles and stores code, so that runs can name it by
// its SHA-256 (RunSpec.ModuleSHA256), which it returns, and the first of
// them starts without compiling: the module is compiled for a run whose
// grant has no limits section, as most runs are. A module the host
// refuses (not wasm, over a limit, malformed) is not stored.
func (h *Host) PutModule(ctx context.Context, code []byte) ([]byte, error) {
	limits, err := (*Limits)(nil).within(h.cfg.Limits)
	if err != nil {
		return nil, err
	}
	m, err := h.engine.compile(ctx, code, h.engine.runLimits(limits))
	if err != nil {
		return nil, err
	}
	if err := h.deps.Store.PutModule(ctx, m.SHA256, code); err != nil {
		return nil, fmt.Errorf("host: store module: %w", err)
	}
	return m.SHA256, nil
}

// HasModule says whether the host's store holds the module with SHA-256
// sum.
func (h *Host) HasModule(ctx context.Context, sum []byte) (bool, error) {
	if mh, ok := h.deps.Store.(ModuleHaver); ok {
		return mh.HasModule(ctx, sum)
	}
	_, err := h.deps.Store.Module(ctx, sum)
	if errors.Is(err, journal.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// runModule returns the compiled module of a run of spec under module
// limits ml: from its bytes (spec.Code, stored here when the run starts)
// or, named by hash (spec.ModuleSHA256), from the engine's compiled
// modules or the store. fromStore says the store holds the module already.
func (h *Host) runModule(ctx context.Context, spec RunSpec, ml moduleLimits) (m *Module, fromStore bool, err error) {
	if spec.Code != nil {
		if spec.ModuleSHA256 != nil {
			if got := sha256.Sum256(spec.Code); !bytes.Equal(got[:], spec.ModuleSHA256) {
				return nil, false, fmt.Errorf("host: %w: given %x, the bytes' is %x", ErrModuleMismatch, spec.ModuleSHA256, got)
			}
		}
		m, err := h.engine.compile(ctx, spec.Code, ml)
		return m, false, err
	}
	if len(spec.ModuleSHA256) != sha256.Size {
		return nil, false, fmt.Errorf("host: a run needs its module: its bytes (RunSpec.Code) or its SHA-256 (RunSpec.ModuleSHA256, %d bytes; got %d)", sha256.Size, len(spec.ModuleSHA256))
	}
	sum := [32]byte(spec.ModuleSHA256)
	unknown := func() error { return fmt.Errorf("host: module %s: %w", hex.EncodeToString(sum[:]), ErrUnknownModule) }
	m, hit, err := h.engine.compileSum(ctx, sum, ml, func() ([]byte, error) {
		code, err := h.deps.Store.Module(ctx, sum[:])
		if errors.Is(err, journal.ErrNotFound) {
			return nil, unknown()
		}
		return code, err
	})
	if err != nil || !hit {
		return m, err == nil, err
	}
	// Compiled already, perhaps from bytes the store does not hold (a
	// module re-executed, not run): the journal needs it there.
	ok, err := h.HasModule(ctx, sum[:])
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, unknown()
	}
	return m, true, nil
}
