// Package llm is the model-call capability (agentrt:llm): calls to the
// model providers of the cell's llm.yaml, which the grant names.
//
//	llm.complete (abi.LLMRequest) -> abi.LLMResponse   effect, idempotent
//	             with stream: true -> abi.LLMBatch (the first chunks)
//	llm.next     (abi.LLMNextRequest) -> abi.LLMBatch  pure
//
// A model call changes nothing outside its cost, so one a crash left in
// doubt is sent again on resume; one the journal completed never is. A
// streamed call answers as soon as its first chunk is in, and each
// llm.next answers the chunks that arrived since, no sooner than 50 ms
// after the batch before unless they hold 4 KiB (a batch), so that the journal holds a stream in a few entries
// and commits each as it comes (caps.Handler.Flush). The last batch holds
// the whole answer. A stream this process no longer holds (the run was
// resumed after a crash) cannot be continued: llm.next answers failed
// "stream_interrupted", after the batches the journal replayed, and the
// guest decides.
//
// Errors: StatusBadRequest for a request abi.LLMRequest.Validate refuses,
// StatusDenied for a provider or model that the grant or the cell does not
// allow, StatusTooLarge for max_output_tokens above the grant's, and
// StatusFailed when the provider did not answer, its message beginning with
// the error's kind (abi.LLMKindOf). The API key stays in the cell: it is in
// no request, response, chunk or error the guest or the journal sees.
//
// Budget: a call reserves its worst case (its input tokens bounded by
// provider.EstimateInputTokens, its max output tokens, at the model's
// prices) before it is journaled, and settles at the usage the provider
// reported (caps.Meter); a stream holds its reservation until its last
// batch (caps.Settler), and one that breaks is charged its worst case.
//
// A run may have an Override (a fork's --provider and --model): it
// replaces the request's provider and model before any check, so the
// grant, the cell's providers, the policy and the budget see the model
// called.
//
// The grant section is llm: {providers: [...], models: [...],
// max_output_tokens: N}; the policy sees the resource Model::NAME and the
// context attributes provider and max_output_tokens. It needs the cell's
// providers (Deps.Providers).
package llm

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/budget"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
)

// Batching of streamed answers.
const (
	// BatchWait is the least time between two batches of a stream (the
	// first goes at once).
	BatchWait = 50 * time.Millisecond
	// BatchBytes ends a batch early once its chunks hold this many bytes
	// of text and arguments.
	BatchBytes = 4 << 10
)

// Grant allows model calls to the providers and models it lists.
type Grant struct {
	// Providers are names of the cell's llm.yaml; a request that names
	// none goes to the first.
	Providers []string `yaml:"providers" cbor:"providers"`
	// Models are the models the run may call, at any of its providers
	// that prices them.
	Models []string `yaml:"models" cbor:"models"`
	// MaxOutputTokens bounds every call's max_output_tokens.
	MaxOutputTokens uint32 `yaml:"max_output_tokens" cbor:"max_output_tokens"`
}

// Check requires providers, models and a bound, without repeats.
func (g *Grant) Check() error {
	if len(g.Providers) == 0 || len(g.Models) == 0 || g.MaxOutputTokens == 0 {
		return errors.New("llm: list the providers and models and bound the output (llm: {providers: [openai], models: [gpt-4o-mini], max_output_tokens: 4096})")
	}
	for _, list := range [][]string{g.Providers, g.Models} {
		for i, n := range list {
			if n == "" || strings.ContainsRune(n, 0) {
				return fmt.Errorf("llm: %q is not a name", n)
			}
			if slices.Contains(list[:i], n) {
				return fmt.Errorf("llm: %q is listed twice", n)
			}
		}
	}
	return nil
}

// Token sets the llm capability of a token.
func (g *Grant) Token(c *capability.Caps) error {
	c.LLM = &capability.LLM{Providers: slices.Clone(g.Providers), Models: slices.Clone(g.Models), MaxOutputTokens: g.MaxOutputTokens}
	return nil
}

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Deps is what the capability needs from its cell.
type Deps struct {
	// Providers are the cell's; nil: the cell has no llm.yaml, and every
	// call is denied saying so.
	Providers *Providers
	// Override replaces the provider and the model of every llm.complete
	// of the run (a fork's, journal.Fork), before the grant checks them.
	Override Override
}

// Override names the provider and the model that replace a request's
// when set: an experiment on a recorded run (agentrt fork --provider
// --model). The journal keeps the request as the guest made it; the run's
// header records the override.
type Override struct {
	Provider, Model string
}

// Providers are a cell's model providers, from its llm.yaml, with a
// client per provider made on first use (its credential read then). It
// is safe for concurrent use by every run of the cell.
type Providers struct {
	cfg    *provider.Config
	hc     *http.Client
	images provider.Images

	mu      sync.Mutex
	clients map[string]*provider.Client
}

// NewProviders returns the providers of cfg, whose calls go through hc
// (nil: a client of its own, without a timeout: each provider's applies
// per attempt). images resolves images by hash (nil: a request with an
// image fails).
func NewProviders(cfg *provider.Config, hc *http.Client, images provider.Images) *Providers {
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Providers{cfg: cfg, hc: hc, images: images, clients: map[string]*provider.Client{}}
}

// Config returns the configuration the providers come from.
func (p *Providers) Config() *provider.Config { return p.cfg }

// client returns the client of the provider name, made on first use.
func (p *Providers) client(name string) (*provider.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[name]; c != nil {
		return c, nil
	}
	pr := p.cfg.Providers[name]
	cred, err := pr.LoadCredential()
	if err != nil {
		return nil, err
	}
	c, err := provider.New(pr, cred, p.hc, p.images)
	if err != nil {
		return nil, err
	}
	p.clients[name] = c
	return c, nil
}

// Capability is the llm capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapLLM }

// FromToken grants the token's providers and models.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.LLM == nil {
		return nil, nil
	}
	return &Grant{Providers: slices.Clone(c.LLM.Providers), Models: slices.Clone(c.LLM.Models), MaxOutputTokens: c.LLM.MaxOutputTokens}, nil
}

// Open returns the run's model caller.
func (Capability) Open(g *Grant, d Deps, r *caps.Run) (caps.Instance, error) {
	ctx, cancel := context.WithCancel(context.Background())
	return &instance{grant: g, deps: d, run: r, ctx: ctx, cancel: cancel, streams: map[uint64]*stream{}, ended: map[uint64]provider.ModelPrice{}}, nil
}

type instance struct {
	grant *Grant
	deps  Deps
	run   *caps.Run
	// ctx ends the run's streams when the run closes.
	ctx    context.Context
	cancel context.CancelFunc

	// cur is the call being served, decoded once for its check, facts,
	// estimate, dispatch and usage.
	cur current

	streams map[uint64]*stream // open streams, by the step that opened them
	// ended are the streams that delivered their last batch (or their
	// error), with their model's price.
	ended map[uint64]provider.ModelPrice
}

// current is the decoded request of the call being served.
type current struct {
	step     uint64
	req      abi.LLMRequest
	provider string
	price    provider.ModelPrice
	next     abi.LLMNextRequest
	// attempts are the provider's attempts at an unstreamed call, with
	// the usage each reported.
	attempts []provider.Attempt
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	switch op.Code {
	case abi.OpLLMComplete:
		return caps.Handler{Conversation: "messages", Check: in.checkComplete, Serve: in.complete}
	case abi.OpLLMNext:
		return caps.Handler{Flush: true, Check: in.checkNext, Serve: in.next}
	}
	return caps.Handler{}
}

// Idempotent: llm.complete is idempotent in the ABI; llm.next is pure.
func (in *instance) Idempotent(*caps.Call) bool { return true }

// Close ends the run's open streams.
func (in *instance) Close() { in.cancel() }

// checkComplete decodes and validates the request and checks its
// provider, model and bound against the grant and the cell.
func (in *instance) checkComplete(c *caps.Call) *caps.Denial {
	in.cur = current{step: c.Step}
	r := &in.cur.req
	if d := caps.DecodeCheck(c, r); d != nil {
		return d
	}
	if err := r.Validate(); err != nil {
		return caps.Deny(abi.StatusBadRequest, "llm.complete: %v", err)
	}
	if o := in.deps.Override; o.Provider != "" {
		r.Provider = o.Provider
	}
	if o := in.deps.Override; o.Model != "" {
		r.Model = o.Model
	}
	name := r.Provider
	if name == "" {
		name = in.grant.Providers[0]
	}
	if !slices.Contains(in.grant.Providers, name) {
		return caps.Deny(abi.StatusDenied, "llm: provider %q is not granted (granted: %s)", name, strings.Join(in.grant.Providers, ", "))
	}
	if !slices.Contains(in.grant.Models, r.Model) {
		return caps.Deny(abi.StatusDenied, "llm: model %q is not granted (granted: %s)", r.Model, strings.Join(in.grant.Models, ", "))
	}
	if r.MaxOutputTokens > in.grant.MaxOutputTokens {
		return caps.Deny(abi.StatusTooLarge, "llm: max_output_tokens %d is above the grant's %d", r.MaxOutputTokens, in.grant.MaxOutputTokens)
	}
	if in.deps.Providers == nil {
		return caps.Deny(abi.StatusDenied, "llm: this cell has no model providers (configure them in its %s)", provider.FileName)
	}
	p := in.deps.Providers.cfg.Providers[name]
	if p == nil {
		return caps.Deny(abi.StatusDenied, "llm: provider %q is not configured in this cell's %s (it has: %s)", name, provider.FileName, strings.Join(in.deps.Providers.cfg.ProviderNames(), ", "))
	}
	price, ok := p.Models[r.Model]
	if !ok {
		return caps.Deny(abi.StatusDenied, "llm: provider %s of this cell does not offer model %q (it prices: %s)", name, r.Model, strings.Join(p.ModelNames(), ", "))
	}
	in.cur.provider, in.cur.price = name, price
	return nil
}

// checkNext decodes an llm.next request: it names an earlier step.
func (in *instance) checkNext(c *caps.Call) *caps.Denial {
	in.cur = current{step: c.Step}
	if d := caps.DecodeCheck(c, &in.cur.next); d != nil {
		return d
	}
	if s := in.cur.next.Step; s == 0 || s >= c.Step {
		return caps.Deny(abi.StatusBadRequest, "llm.next: step %d is not an earlier step of the run (this is step %d)", s, c.Step)
	}
	if _, ok := in.ended[in.cur.next.Step]; ok {
		return caps.Deny(abi.StatusBadRequest, "llm.next: the stream of step %d has ended: its last batch was delivered", in.cur.next.Step)
	}
	return nil
}

// Facts gives the policy the model, its provider and the output bound.
func (in *instance) Facts(c *caps.Call) (caps.Facts, error) {
	if c.Op.Code != abi.OpLLMComplete {
		return caps.Facts{}, nil
	}
	if in.cur.step != c.Step {
		return caps.Facts{}, fmt.Errorf("llm: facts of step %d asked before its check", c.Step)
	}
	return caps.Facts{ResourceType: "Model", ResourceID: in.cur.req.Model, Attrs: []caps.Fact{
		{Name: "provider", Kind: caps.FactString, Str: in.cur.provider},
		{Name: "max_output_tokens", Kind: caps.FactNumber, Num: int64(in.cur.req.MaxOutputTokens)},
	}}, nil
}

// failed is the failed answer of a call the provider did not answer.
func failed(err error) (abi.Status, []byte) {
	var e *provider.Error
	if errors.As(err, &e) {
		return caps.Error(abi.StatusFailed, "%s", e.Error())
	}
	if errors.Is(err, provider.ErrModelNotAllowed) {
		return caps.Error(abi.StatusDenied, "llm: %v", err)
	}
	return caps.Error(abi.StatusFailed, "%s: %v", abi.LLMUnavailable, err)
}

// complete makes the call: the whole answer, or a stream's first batch.
func (in *instance) complete(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	if in.cur.step != c.Step {
		// A call a crash left in doubt, sent again on resume: the gate
		// checked it before its intent, in the run that crashed; its
		// request is the same (the resume compared it).
		if d := in.checkComplete(c); d != nil {
			return d.Status, d.Body
		}
	}
	cl, err := in.deps.Providers.client(in.cur.provider)
	if err != nil {
		return caps.Error(abi.StatusFailed, "%s: provider %s: %v", abi.LLMUnavailable, in.cur.provider, err)
	}
	req := in.cur.req
	if !req.Stream {
		res, err := cl.Complete(ctx, &req, nil)
		in.cur.attempts = res.Attempts
		if err != nil {
			return failed(err)
		}
		res.Response.Provider, res.Response.Credential = in.cur.provider, cl.CredentialID()
		return caps.OK(&res.Response)
	}
	var cursor *abi.LLMCursor
	if cl.Resumable() {
		cursor = &abi.LLMCursor{Provider: in.cur.provider, Model: req.Model}
	}
	s := newStream(c.Step, in.cur.price, cursor, cl)
	in.streams[c.Step] = s
	go s.run(in.ctx, &req)
	return in.batch(ctx, s)
}

// next delivers the next batch of a stream: one this instance holds, or
// one the run lost (it was resumed) that the provider can resume from the
// request's cursor.
func (in *instance) next(ctx context.Context, c *caps.Call) (abi.Status, []byte) {
	step := in.cur.next.Step
	s := in.streams[step]
	if s == nil {
		s = in.resumable(step, in.cur.next.Cursor)
		if s == nil {
			return caps.Error(abi.StatusFailed, "%s: the stream of step %d was lost when the run stopped, and its provider cannot resume it; the chunks delivered before this are a prefix of the answer: ask again for a whole one",
				abi.LLMStreamInterrupted, step)
		}
		in.streams[step] = s
		go s.resume(in.ctx)
	}
	return in.batch(ctx, s)
}

// resumable returns a stream of step to resume from cursor, or nil when it cannot be: no cursor, a provider or
// model no longer granted or offered, a provider that cannot resume, or a
// cursor the host did not seal for this run and step.
func (in *instance) resumable(step uint64, cur *abi.LLMCursor) *stream {
	if cur == nil || cur.ResponseID == "" || in.deps.Providers == nil ||
		!slices.Contains(in.grant.Providers, cur.Provider) || !slices.Contains(in.grant.Models, cur.Model) {
		return nil
	}
	p := in.deps.Providers.cfg.Providers[cur.Provider]
	if p == nil {
		return nil
	}
	price, ok := p.Models[cur.Model]
	if !ok {
		return nil
	}
	cl, err := in.deps.Providers.client(cur.Provider)
	if err != nil || !cl.Resumable() || !hmac.Equal(cur.MAC, seal(cl, in.run.ID.String(), step, cur)) {
		return nil
	}
	c := *cur
	return newStream(step, price, &c, cl)
}

// seal is the MAC of cursor c of the stream of step in run.
func seal(cl *provider.Client, run string, step uint64, c *abi.LLMCursor) []byte {
	return cl.Seal(run, strconv.FormatUint(step, 10), c.Provider, c.Model, c.ResponseID, strconv.FormatUint(c.Delivered, 10))
}

// batch waits for a stream's next chunks and answers them, with the whole
// answer when the stream has ended; a stream's error comes once every
// chunk before it was delivered.
func (in *instance) batch(ctx context.Context, s *stream) (abi.Status, []byte) {
	chunks, res, err, done := s.take(ctx, in.run.Halt)
	if done {
		delete(in.streams, s.step)
		in.ended[s.step] = s.price
	}
	if err != nil {
		return failed(err)
	}
	if res != nil {
		res.Provider, res.Credential = s.cl.Name(), s.cl.CredentialID()
	}
	b := abi.LLMBatch{Step: s.step, Chunks: chunks, Response: res}
	if b.Chunks == nil {
		b.Chunks = []abi.LLMChunk{}
	}
	if cur := s.snapshot(); cur != nil && !done && cur.ResponseID != "" {
		cur.MAC = seal(s.cl, in.run.ID.String(), s.step, cur)
		b.Cursor = cur
	}
	return caps.OK(&b)
}

// Estimate is the call's worst case: one model call, its input tokens
// bounded, its max output tokens, at the model's prices.
func (in *instance) Estimate(c *caps.Call) (budget.Amounts, error) {
	if c.Op.Code != abi.OpLLMComplete {
		return budget.Amounts{}, nil
	}
	return budget.WorstCase(provider.EstimateInputTokens(&in.cur.req), uint64(in.cur.req.MaxOutputTokens), in.cur.price.Price())
}

// Usage charges an unstreamed call every attempt's usage; a stream holds
// its reservation until its last batch, unless its first was its last.
func (in *instance) Usage(c *caps.Call, status abi.Status, resp []byte) (budget.Amounts, bool) {
	if c.Op.Code != abi.OpLLMComplete {
		return budget.Amounts{}, false
	}
	if in.cur.req.Stream {
		var b abi.LLMBatch
		if status == abi.StatusOK && abi.Unmarshal(resp, &b) == nil {
			if b.Response == nil {
				return budget.Amounts{}, true
			}
			return charge(b.Response.Usage, in.cur.price), false
		}
		// A stream that failed before its first chunk: what it cost is
		// the attempts' usage, which a failed reply does not report.
		return budget.Amounts{budget.ModelCalls: 1}, false
	}
	var u abi.LLMUsage
	for _, a := range in.cur.attempts {
		u = u.Add(a.Usage)
	}
	return charge(u, in.cur.price), false
}

// Settles settles a stream's reservation with its last batch, or at its
// worst case when the stream broke.
func (in *instance) Settles(c *caps.Call, status abi.Status, resp []byte) (caps.Settlement, bool) {
	if c.Op.Code != abi.OpLLMNext || in.cur.step != c.Step {
		return caps.Settlement{}, false
	}
	step := in.cur.next.Step
	if status == abi.StatusOK {
		var b abi.LLMBatch
		if abi.Unmarshal(resp, &b) != nil || b.Response == nil {
			return caps.Settlement{}, false
		}
		return caps.Settlement{Step: step, Used: charge(b.Response.Usage, in.ended[step])}, true
	}
	if status == abi.StatusFailed {
		return caps.Settlement{Step: step, Worst: true}, true
	}
	return caps.Settlement{}, false
}

// charge is what usage u costs at p; a cost past a uint64 of micro-USD
// is charged as the most there is, which no ceiling admits.
func charge(u abi.LLMUsage, p provider.ModelPrice) budget.Amounts {
	a, err := budget.Charge(budget.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}, p.Price())
	if err != nil {
		a = budget.Amounts{budget.ModelCalls: 1, budget.InputTokens: u.Input + u.CacheRead + u.CacheWrite, budget.OutputTokens: u.Output, budget.MicroUSD: ^uint64(0)}
	}
	return a
}
