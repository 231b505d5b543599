package cell

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agentrt/agentrt/host"
)

// Modules stored once by hash: a client pushes a module (POST /v1/modules)
// or submits its bytes once, and names it by its SHA-256 afterwards
// (Submission.ModuleSHA256), so that a submission is small and the cell,
// which keeps it compiled, starts the run without decoding or compiling
// it.

// ModuleInfo answers POST /v1/modules and GET /v1/modules/{sha256}.
type ModuleInfo struct {
	SHA256 string `json:"sha256"`
	// Size is the module's length in bytes, in an answer to a push.
	Size int `json:"size,omitempty"`
}

// ModulePush is the body of POST /v1/modules.
type ModulePush struct {
	// Module is the wasm module (base64 in JSON).
	Module []byte `json:"module"`
}

// parseModuleSum parses a module's SHA-256 as the API names it.
func parseModuleSum(s string) ([]byte, error) {
	sum, err := hex.DecodeString(s)
	if err != nil || len(sum) != 32 {
		return nil, fmt.Errorf("module sha256 %q is not 64 hex digits", s)
	}
	return sum, nil
}

func (s *Server) pushModule(w http.ResponseWriter, r *http.Request) {
	var p ModulePush
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("module push: over %d MiB: %w", MaxSubmission>>20, err), Hint(ErrModuleTooLarge))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("module push: %w", err), `send {"module": BASE64}`)
		return
	}
	if len(p.Module) > MaxModule {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("module push: %w (this one is %d bytes)", ErrModuleTooLarge, len(p.Module)), "")
		return
	}
	if len(p.Module) == 0 {
		writeError(w, http.StatusBadRequest, errors.New("module push: no module"), `send {"module": BASE64}`)
		return
	}
	sum, err := s.cell.Host.PutModule(r.Context(), p.Module)
	if err != nil {
		writeError(w, startErrorCode(err), err, "")
		return
	}
	writeJSON(w, http.StatusCreated, ModuleInfo{SHA256: hex.EncodeToString(sum), Size: len(p.Module)})
}

func (s *Server) getModule(w http.ResponseWriter, r *http.Request) {
	sum, err := parseModuleSum(r.PathValue("sha256"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err, "")
		return
	}
	ok, err := s.cell.Host.HasModule(r.Context(), sum)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, err, "")
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Errorf("module %x: %w", sum, host.ErrUnknownModule), "")
	default:
		writeJSON(w, http.StatusOK, ModuleInfo{SHA256: hex.EncodeToString(sum)})
	}
}

// Module asks the cell whether it holds the module with SHA-256 sum (64
// hex digits); an error matching host.ErrUnknownModule says it does not.
func (c *Client) Module(ctx context.Context, sum string) (ModuleInfo, error) {
	var mi ModuleInfo
	return mi, c.call(ctx, http.MethodGet, "/v1/modules/"+url.PathEscape(sum), nil, &mi)
}

// PushModule stores a module in the cell, checked and compiled, and
// returns its SHA-256.
func (c *Client) PushModule(ctx context.Context, code []byte) (ModuleInfo, error) {
	var mi ModuleInfo
	return mi, c.call(ctx, http.MethodPost, "/v1/modules", ModulePush{Module: code}, &mi)
}
