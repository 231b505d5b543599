package agent

import (
	"errors"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// The model-call capability (agentrt:llm): a provider-neutral request,
// which the host maps to the provider the cell configures (OpenAI Chat
// Completions or Responses, Anthropic Messages, an OpenAI-compatible
// server). The API key stays in the cell: it never reaches the guest or
// the journal.
type (
	LLMRequest  = abi.LLMRequest
	LLMMessage  = abi.LLMMessage
	LLMPart     = abi.LLMPart
	LLMTool     = abi.LLMTool
	LLMFormat   = abi.LLMFormat
	LLMResponse = abi.LLMResponse
	LLMUsage    = abi.LLMUsage
	LLMChunk    = abi.LLMChunk
)

// ErrStreamInterrupted matches the error of a stream that broke before its
// last event (the provider cut it, or the run was resumed after a crash
// and the provider cannot resume a stream): the chunks delivered before it
// are a prefix of the answer. Call again to ask anew.
var ErrStreamInterrupted = errors.New("agent: the model's stream was interrupted")

// llmError turns a failed call's host error into one that also matches
// ErrStreamInterrupted when its kind says so.
func llmError(err error) error {
	var he *abi.Error
	if errors.As(err, &he) {
		if k, ok := abi.LLMKindOf(he); ok && k == abi.LLMStreamInterrupted {
			return &streamError{host: he}
		}
	}
	return err
}

// streamError is a HostError of kind stream_interrupted: errors.As finds
// the HostError, and errors.Is matches ErrStreamInterrupted too.
type streamError struct{ host *abi.Error }

func (e *streamError) Error() string   { return e.host.Error() }
func (e *streamError) Unwrap() []error { return []error{e.host, ErrStreamInterrupted} }

// LLMComplete makes one model call and returns the whole answer. It is an
// effect, journaled before it is sent; a call a crash left in doubt is sent
// again on resume (a model call changes nothing outside its cost), and a
// completed one is never sent again. A call whose worst case does not fit
// the run's budget gives an error matching ErrBudget, and nothing is sent.
func LLMComplete(req *LLMRequest) (*LLMResponse, error) {
	r := *req
	r.Stream = false
	var resp abi.LLMResponse
	if err := call(llmTransport, abi.CapLLM, abi.OpLLMComplete, &r, &resp); err != nil {
		return nil, llmError(err)
	}
	return &resp, nil
}

// LLMStream makes one model call with the answer streamed: onChunk gets
// every chunk as the host delivers it (batched about every 50 ms), and the
// whole answer is returned at the end. A stream that breaks returns an
// error matching ErrStreamInterrupted after the chunks already delivered.
// An error from onChunk stops reading and is returned; the call has been
// made and is charged.
func LLMStream(req *LLMRequest, onChunk func(LLMChunk) error) (*LLMResponse, error) {
	r := *req
	r.Stream = true
	var b abi.LLMBatch
	if err := call(llmTransport, abi.CapLLM, abi.OpLLMComplete, &r, &b); err != nil {
		return nil, llmError(err)
	}
	step := b.Step
	for {
		for _, c := range b.Chunks {
			if onChunk != nil {
				if err := onChunk(c); err != nil {
					return nil, err
				}
			}
		}
		if b.Response != nil {
			return b.Response, nil
		}
		next := abi.LLMNextRequest{Step: step, Cursor: b.Cursor}
		b = abi.LLMBatch{}
		if err := call(llmTransport, abi.CapLLM, abi.OpLLMNext, &next, &b); err != nil {
			return nil, llmError(err)
		}
	}
}
