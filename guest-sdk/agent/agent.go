package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// HostError is the error of a call the host refused or that failed: its
// status code and the host's message. Compare it with errors.Is against
// the sentinels below (errors.Is(err, ErrDenied)), or read it with
// errors.As into a *HostError. (Error is a log level.)
type HostError = abi.Error

// Status is the numeric outcome of a call, a HostError's Code.
type Status = abi.Status

// Sentinel errors to compare host errors with errors.Is: each matches
// every HostError with its status, whatever the message.
var (
	ErrBadRequest = &abi.Error{Code: abi.StatusBadRequest}
	ErrTooLarge   = &abi.Error{Code: abi.StatusTooLarge}
	ErrDenied     = &abi.Error{Code: abi.StatusDenied}
	ErrNotFound   = &abi.Error{Code: abi.StatusNotFound}
	ErrFailed     = &abi.Error{Code: abi.StatusFailed}
	ErrInDoubt    = &abi.Error{Code: abi.StatusInDoubt}
	ErrInternal   = &abi.Error{Code: abi.StatusInternal}
	// ErrBudget: the call's worst case does not fit in what is left of a
	// budget ceiling of the run; nothing of it was sent.
	ErrBudget = &abi.Error{Code: abi.StatusBudget}
)

// ErrNotWasm is returned by every call outside GOOS=wasip1.
var ErrNotWasm = errors.New("agent: the guest SDK works only in a wasip1 module run by agentrt")

// transportFunc sends one request through one capability's imports.
type transportFunc func(op uint32, req []byte) (abi.Status, []byte, error)

// call sends one request and decodes the response into resp (which may be
// nil). A status other than OK is returned as the host's *abi.Error.
func call(t transportFunc, c abi.Capability, op uint32, req, resp any) error {
	var body []byte
	if req != nil {
		b, err := abi.Marshal(req)
		if err != nil {
			return fmt.Errorf("agent: encode %s request: %w", c, err)
		}
		body = b
	}
	status, out, err := t(op, body)
	if err != nil {
		return err
	}
	if status != abi.StatusOK {
		e := &abi.Error{Code: status}
		if abi.Unmarshal(out, e) != nil || e.Code != status {
			e = &abi.Error{Code: status, Message: "malformed error body"}
		}
		return e
	}
	if resp == nil {
		return nil
	}
	if err := abi.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("agent: decode %s response: %w", c, err)
	}
	return nil
}

// Main runs fn as the agent: it reads the run input, calls fn, records what
// fn returns as the run output, and exits. If fn fails, its error is logged
// and the run ends failed (exit status 1).
func Main(fn func(ctx context.Context, input []byte) ([]byte, error)) {
	input, err := Input()
	if err == nil {
		var out []byte
		out, err = fn(context.Background(), input)
		if err == nil {
			err = SetOutput(out)
		}
	}
	if err != nil {
		_ = Log(Error, err.Error())
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// MainJSON is Main for agents whose input and output are JSON: the input is
// decoded into In (an empty input decodes as the zero In) and the Out that
// fn returns is encoded as the output.
func MainJSON[In, Out any](fn func(ctx context.Context, input In) (Out, error)) {
	Main(func(ctx context.Context, raw []byte) ([]byte, error) {
		var in In
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("input is not the JSON this agent expects: %w", err)
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	})
}
