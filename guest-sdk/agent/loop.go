package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentrt/agentrt/guest-sdk/abi"
)

// LoopReason says why a Loop ended.
type LoopReason uint8

// The reasons a Loop ends. Every one but LoopDone and LoopBudget (and
// LoopMaxMoney, LoopMaxWall when the host refused a call for them) is
// followed by the concluding call (Loop).
const (
	// LoopDone: the Done predicate held.
	LoopDone LoopReason = iota
	// LoopMaxIterations: MaxIterations steps ran.
	LoopMaxIterations
	// LoopMaxTokens: another step and the concluding call would not fit
	// in MaxInputTokens or MaxOutputTokens.
	LoopMaxTokens
	// LoopMaxMoney: the host refused a model call because MaxMicroUSD
	// would not cover its worst case (money is counted by the host alone).
	LoopMaxMoney
	// LoopMaxWall: MaxWall has passed, by the loop's Clock or, when the
	// host refused a call for it, by the host's.
	LoopMaxWall
	// LoopMaxToolCalls: the model asked for more tool calls than
	// MaxToolCalls leaves; none of them ran.
	LoopMaxToolCalls
	// LoopRepeat: the model asked for the same call (the same
	// Fingerprint) a third time; that batch of calls did not run.
	LoopRepeat
	// LoopPingPong: the model's last four calls alternate between two
	// (A, B, A, B); the batch completing the pattern did not run.
	LoopPingPong
	// LoopBudget: the host refused a call because a ceiling of the run's
	// budget (its token's, its grant's or the loop's) would not cover it.
	LoopBudget
)

var loopReasonNames = [...]string{"done", "max_iterations", "max_tokens", "max_money", "max_wall", "max_tool_calls", "repeat", "ping_pong", "budget"}

func (r LoopReason) String() string {
	if int(r) < len(loopReasonNames) {
		return loopReasonNames[r]
	}
	return fmt.Sprintf("LoopReason(%d)", uint8(r))
}

// LoopConfig is what a Loop runs: the conversation it starts from, its
// caps and its Done predicate. A cap of 0 is no cap, except MaxIterations,
// which every loop needs.
type LoopConfig struct {
	// Request starts the conversation: the model, the system and user
	// messages, the tools the model may call, and MaxOutputTokens, the
	// bound of every call.
	Request LLMRequest
	// MaxIterations bounds the steps. A step makes at most one model call,
	// so the host's model_calls ceiling is MaxIterations + 1 (the
	// concluding call).
	MaxIterations int
	// MaxInputTokens and MaxOutputTokens bound the tokens of every model
	// call of the loop, the concluding one included; input counts cached
	// tokens too. The loop stops before a step when the step's call and
	// the concluding call could not both fit, by the host's worst case.
	MaxInputTokens  uint64
	MaxOutputTokens uint64
	// MaxMicroUSD bounds what the loop's model calls cost, in millionths
	// of a dollar. Prices are the host's: only the host enforces it.
	MaxMicroUSD uint64
	// MaxWall bounds the loop's wall-clock time, by Clock, which it needs.
	MaxWall time.Duration
	// Clock reads the time MaxWall is measured by. Use Now, the host's
	// real time (journaled; it needs the clock capability): time.Now
	// reads the run's virtual clock, which does not advance while the
	// host waits for a model.
	Clock func() (time.Time, error)
	// MaxToolCalls bounds the tool calls the loop admits (LoopState.Admit).
	MaxToolCalls int
	// Done reports whether the loop has reached its goal, after each
	// step. Nil: done when the model's last answer asks for no tool.
	Done func(*LoopState) bool
	// Conclusion is the note that asks the model for its final answer in
	// the concluding call; the loop's reason follows it. Empty: a note
	// saying tools are gone and a final answer is due.
	Conclusion string
}

// StepFunc is one iteration of a Loop. It makes at most one model call,
// with LoopState.Complete, and before it runs tool calls the model asked
// for, it asks LoopState.Admit and returns Admit's error if it refuses.
// Any other error it returns ends the loop with that error, except one
// matching ErrBudget, which ends it with LoopBudget.
type StepFunc func(ctx context.Context, s *LoopState) error

// LoopState is where a loop stands, for its steps and its Done predicate.
type LoopState struct {
	// Conversation is the request of the next model call: Complete
	// appends the model's answers, and a step appends tool results.
	Conversation *LLMRequest
	// Iteration is the number of steps begun before this one.
	Iteration int
	// Usage sums the usage of every model call so far.
	Usage LLMUsage
	// ToolCalls counts the tool calls admitted so far.
	ToolCalls int
	// Last is the model's last answer, nil before the first.
	Last *LLMResponse

	cfg     *LoopConfig
	seen    map[[32]byte]int
	history [][32]byte
	called  bool
	start   time.Time
}

// loopStop is the error Admit returns for a batch it refuses: the step
// returns it, and the loop concludes with its reason.
type loopStop struct {
	reason LoopReason
	detail string
}

func (e *loopStop) Error() string { return "agent: loop stops: " + e.reason.String() + ": " + e.detail }

// LoopResult is how a loop ended.
type LoopResult struct {
	Reason LoopReason
	// Detail says what tripped the reason, for people: the cap and its
	// amounts, the repeated call, the host's message.
	Detail string
	// Response is the concluding call's answer when Concluded, and
	// otherwise the model's last answer (nil if there was none).
	Response *LLMResponse
	// Concluded is set when the loop made its concluding call and the
	// model answered it.
	Concluded  bool
	Iterations int
	ToolCalls  int
	// Usage sums every model call of the loop, the concluding one
	// included.
	Usage LLMUsage
}

// Loop runs step until cfg.Done holds or a cap is reached, and returns
// why it ended with the final answer.
//
// Before the first step it asks the host to enforce its caps (Limit: the
// model calls, tokens, money and wall clock), which journals them, so a
// step that ignores the loop's own checks still cannot exceed them. Tool
// calls are the loop's alone: the host sees the native tools a tool
// function runs (its tool_calls ceiling is the grant's), not the calls
// the model asks of the agent.
//
// At a cap, and when the model repeats a call three times or ping-pongs
// between two, Loop makes one concluding call: the conversation with its
// tool calls and results written as text, the calls left unanswered said
// not to have run, a user note asking for a final answer, and no tools. When the host refused a call
// for its budget (LoopBudget, and LoopMaxMoney or LoopMaxWall then), it
// makes none: the host would refuse it too. A concluding call the host
// refuses for its budget leaves Concluded unset, and is no error.
//
// An error of a step or of the clock ends the loop with no result; an
// error of the concluding call comes with the result, its reason set. A
// config that cannot run is refused before anything is sent.
func Loop(ctx context.Context, cfg LoopConfig, step StepFunc) (*LoopResult, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if step == nil {
		return nil, errors.New("agent: loop: step is nil")
	}
	if _, err := Limit(cfg.hostLimits()...); err != nil {
		return nil, fmt.Errorf("agent: loop: the host did not take the loop's caps (run.limit): %w", err)
	}
	req := cfg.Request
	req.Messages = append([]LLMMessage(nil), cfg.Request.Messages...)
	s := &LoopState{Conversation: &req, cfg: &cfg, seen: map[[32]byte]int{}}
	if cfg.MaxWall > 0 {
		t, err := cfg.Clock()
		if err != nil {
			return nil, fmt.Errorf("agent: loop: reading the clock: %w", err)
		}
		s.start = t
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		reason, detail, err := s.capReached()
		if err != nil {
			return nil, err
		}
		if detail != "" {
			return s.conclude(reason, detail)
		}
		s.called = false
		err = step(ctx, s)
		s.Iteration++
		var stop *loopStop
		switch {
		case errors.As(err, &stop):
			return s.conclude(stop.reason, stop.detail)
		case errors.Is(err, ErrBudget):
			return s.result(cfg.budgetReason(err), err.Error(), nil), nil
		case err != nil:
			return nil, err
		}
		if s.done() {
			return s.result(LoopDone, "", nil), nil
		}
	}
}

// check refuses a config whose caps could not hold, before the loop sends
// anything.
func (c *LoopConfig) check() error {
	if c.MaxIterations <= 0 {
		return fmt.Errorf("agent: loop: MaxIterations is %d: a loop needs a bound on its steps (set it to 1 or more)", c.MaxIterations)
	}
	if c.MaxToolCalls < 0 {
		return fmt.Errorf("agent: loop: MaxToolCalls is %d: set it to 0 (no cap) or more", c.MaxToolCalls)
	}
	if c.MaxWall < 0 {
		return fmt.Errorf("agent: loop: MaxWall is %v: set it to 0 (no cap) or more", c.MaxWall)
	}
	if c.MaxWall > 0 && c.Clock == nil {
		return errors.New("agent: loop: MaxWall needs a Clock: set LoopConfig.Clock to agent.Now (the clock capability); time.Now reads the virtual clock, which does not advance while the host waits")
	}
	if err := c.Request.Validate(); err != nil {
		return fmt.Errorf("agent: loop: Request: %w", err)
	}
	out := uint64(c.Request.MaxOutputTokens)
	if c.MaxOutputTokens > 0 && c.MaxOutputTokens < 2*out {
		return fmt.Errorf("agent: loop: MaxOutputTokens %d leaves no room for one step and the concluding call, of Request.MaxOutputTokens %d each: raise it to %d or lower Request.MaxOutputTokens",
			c.MaxOutputTokens, out, 2*out)
	}
	if in := 2 * inputBound(&c.Request); c.MaxInputTokens > 0 && c.MaxInputTokens < in {
		return fmt.Errorf("agent: loop: MaxInputTokens %d leaves no room for one step and the concluding call, of %d input tokens each at worst: raise it to %d or more",
			c.MaxInputTokens, in/2, in)
	}
	return nil
}

// hostLimits are the caps the host can enforce, as run.limit takes them.
func (c *LoopConfig) hostLimits() []BudgetLimit {
	ls := []BudgetLimit{{Dim: "model_calls", Amount: uint64(c.MaxIterations) + 1}}
	add := func(dim string, n uint64) {
		if n > 0 {
			ls = append(ls, BudgetLimit{Dim: dim, Amount: n})
		}
	}
	add("input_tokens", c.MaxInputTokens)
	add("output_tokens", c.MaxOutputTokens)
	add("micro_usd", c.MaxMicroUSD)
	add("wall_seconds", uint64((c.MaxWall+time.Second-1)/time.Second))
	return ls
}

// budgetReason names the cap behind a refusal of the host's budget: its
// message names the dimension ("budget exceeded: micro_usd: ...", SPEC.md
// §5). Money and wall clock are the loop's reasons when the loop capped
// them; any other ceiling is the run's budget.
func (c *LoopConfig) budgetReason(err error) LoopReason {
	var he *HostError
	if !errors.As(err, &he) {
		return LoopBudget
	}
	switch {
	case c.MaxMicroUSD > 0 && strings.Contains(he.Message, "micro_usd:"):
		return LoopMaxMoney
	case c.MaxWall > 0 && strings.Contains(he.Message, "wall_seconds:"):
		return LoopMaxWall
	}
	return LoopBudget
}

// capReached says which cap, if any, ends the loop before the next step,
// with a detail for people ("" when none does).
func (s *LoopState) capReached() (LoopReason, string, error) {
	c := s.cfg
	if s.Iteration >= c.MaxIterations {
		return LoopMaxIterations, fmt.Sprintf("%d iterations of %d", s.Iteration, c.MaxIterations), nil
	}
	if out := uint64(s.Conversation.MaxOutputTokens); c.MaxOutputTokens > 0 && s.Usage.Output+2*out > c.MaxOutputTokens {
		return LoopMaxTokens, fmt.Sprintf("%d output tokens used of %d, and a step and the concluding call need %d", s.Usage.Output, c.MaxOutputTokens, 2*out), nil
	}
	if c.MaxInputTokens > 0 {
		used := totalInput(s.Usage)
		next := inputBound(s.Conversation)
		if end := inputBound(s.concluding(LoopMaxTokens, "")); used+next+end > c.MaxInputTokens {
			return LoopMaxTokens, fmt.Sprintf("%d input tokens used of %d, and a step and the concluding call need %d at worst", used, c.MaxInputTokens, next+end), nil
		}
	}
	if c.MaxWall > 0 {
		now, err := c.Clock()
		if err != nil {
			return 0, "", fmt.Errorf("agent: loop: reading the clock: %w", err)
		}
		if d := now.Sub(s.start); d >= c.MaxWall {
			return LoopMaxWall, fmt.Sprintf("%v elapsed of %v", d, c.MaxWall), nil
		}
	}
	return 0, "", nil
}

func (s *LoopState) done() bool {
	if s.cfg.Done != nil {
		return s.cfg.Done(s)
	}
	return s.Last != nil && len(s.Last.ToolCalls()) == 0
}

// Complete makes the step's model call on the conversation (LLMComplete),
// counts its usage and appends the answer to the conversation. A step
// makes one model call at most: a second is refused, since the host's
// model_calls ceiling counts one per step.
func (s *LoopState) Complete() (*LLMResponse, error) {
	if s.called {
		return nil, errors.New("agent: loop: a step makes at most one model call (the host's model_calls ceiling is MaxIterations + 1)")
	}
	s.called = true
	resp, err := LLMComplete(s.Conversation)
	if err != nil {
		return nil, err
	}
	s.Usage = s.Usage.Add(resp.Usage)
	s.Last = resp
	if len(resp.Content) > 0 {
		s.Conversation.Messages = append(s.Conversation.Messages, LLMMessage{Role: abi.RoleAssistant, Content: resp.Content})
	}
	return resp, nil
}

// Admit counts the tool calls a step is about to run, the model's calls
// of one answer, and checks them against the loop's caps: it refuses the
// whole batch, and the step returns its error, when the calls would
// exceed MaxToolCalls, when one asks what the model asked twice before,
// or when they complete a ping-pong (A, B, A, B). A refused batch is not
// counted, and the concluding call tells the model its calls did not run.
func (s *LoopState) Admit(calls []LLMPart) error {
	c := s.cfg
	if c.MaxToolCalls > 0 && s.ToolCalls+len(calls) > c.MaxToolCalls {
		return &loopStop{LoopMaxToolCalls, fmt.Sprintf("%d tool calls asked with %d made of %d", len(calls), s.ToolCalls, c.MaxToolCalls)}
	}
	seen := map[[32]byte]int{}
	history := s.history
	for _, call := range calls {
		fp := Fingerprint(call)
		seen[fp]++
		if s.seen[fp]+seen[fp] >= 3 {
			return &loopStop{LoopRepeat, fmt.Sprintf("%s asked a third time with the same arguments %s", call.Name, canonicalArguments(call.Arguments))}
		}
		history = append(history, fp)
		if n := len(history); n >= 4 && history[n-1] == history[n-3] && history[n-2] == history[n-4] && history[n-1] != history[n-2] {
			return &loopStop{LoopPingPong, fmt.Sprintf("the calls alternate between two, the last %s %s", call.Name, canonicalArguments(call.Arguments))}
		}
	}
	for fp, n := range seen {
		s.seen[fp] += n
	}
	s.history = history
	s.ToolCalls += len(calls)
	return nil
}

// concluding returns the request of the concluding call: the
// conversation without tools, its tool calls and results written as text
// (a provider may refuse tool parts in a request that offers no tools, as
// Anthropic's does), the calls left unanswered said not to have run, and
// the note.
func (s *LoopState) concluding(reason LoopReason, detail string) *LLMRequest {
	req := *s.Conversation
	req.Tools = nil
	answered := map[string]bool{}
	for _, m := range s.Conversation.Messages {
		for _, p := range m.Content {
			if p.Type == abi.PartToolResult {
				answered[p.ID] = true
			}
		}
	}
	why := "the loop stopped (" + reason.String() + ")"
	if detail != "" {
		why = "the loop stopped (" + reason.String() + ": " + detail + ")"
	}
	text := func(t string) LLMPart { return LLMPart{Type: abi.PartText, Text: t} }
	req.Messages = make([]LLMMessage, 0, len(s.Conversation.Messages)+1)
	var last []LLMPart
	for _, m := range s.Conversation.Messages {
		parts := make([]LLMPart, 0, len(m.Content))
		for _, p := range m.Content {
			switch p.Type {
			case abi.PartToolCall:
				parts = append(parts, text(toolCallText(p)))
				if !answered[p.ID] {
					last = append(last, text(toolResultText(p.ID, "not run: "+why, true)))
					answered[p.ID] = true
				}
			case abi.PartToolResult:
				parts = append(parts, text(toolResultText(p.ID, p.Text, p.IsError)))
			default:
				parts = append(parts, p)
			}
		}
		req.Messages = append(req.Messages, LLMMessage{Role: m.Role, Content: parts})
	}
	note := s.cfg.Conclusion
	if note == "" {
		note = "You can call no more tools. Give your final answer now, from what you have found so far."
	}
	last = append(last, text(note+" ("+why+")"))
	req.Messages = append(req.Messages, LLMMessage{Role: abi.RoleUser, Content: last})
	return &req
}

// toolCallText and toolResultText write a tool call and its result as the
// concluding call's text: "[tool call ID: NAME ARGUMENTS]", "[tool result
// ID: TEXT]" ("[tool result ID, failed: TEXT]").
func toolCallText(p LLMPart) string {
	args := string(p.Arguments)
	if args == "" {
		args = "{}"
	}
	return "[tool call " + p.ID + ": " + p.Name + " " + args + "]"
}

func toolResultText(id, text string, failed bool) string {
	if failed {
		return "[tool result " + id + ", failed: " + text + "]"
	}
	return "[tool result " + id + ": " + text + "]"
}

// conclude makes the concluding call and returns the loop's result.
func (s *LoopState) conclude(reason LoopReason, detail string) (*LoopResult, error) {
	req := s.concluding(reason, detail)
	resp, err := LLMComplete(req)
	if errors.Is(err, ErrBudget) {
		return s.result(reason, detail+"; the host refused the concluding call: "+err.Error(), nil), nil
	}
	if err != nil {
		return s.result(reason, detail, nil), fmt.Errorf("agent: loop: the concluding call: %w", err)
	}
	s.Usage = s.Usage.Add(resp.Usage)
	s.Conversation = req
	s.Conversation.Messages = append(s.Conversation.Messages, LLMMessage{Role: abi.RoleAssistant, Content: resp.Content})
	return s.result(reason, detail, resp), nil
}

func (s *LoopState) result(reason LoopReason, detail string, concluded *LLMResponse) *LoopResult {
	r := &LoopResult{Reason: reason, Detail: detail, Response: s.Last, Iterations: s.Iteration, ToolCalls: s.ToolCalls, Usage: s.Usage}
	if concluded != nil {
		r.Response, r.Concluded = concluded, true
	}
	return r
}

func totalInput(u LLMUsage) uint64 { return u.Input + u.CacheRead + u.CacheWrite }

// ToolFunc runs one tool the model called, with the call's arguments (JSON
// text), and returns what the model is told. An error is told to the model
// as a failed tool result, except one matching ErrBudget, which ends the
// loop.
type ToolFunc func(ctx context.Context, arguments []byte) (string, error)

// ToolStep is the step of the common tool-calling conversation: one model
// call; if the answer asks for tools, Admit, then each call runs by its
// name in tools (a name tools lacks is a failed result naming those it
// has) and the results are appended to the conversation for the next
// step. Every tool of the request must have a function in tools.
func ToolStep(tools map[string]ToolFunc) StepFunc {
	return func(ctx context.Context, s *LoopState) error {
		for _, t := range s.Conversation.Tools {
			if tools[t.Name] == nil {
				return fmt.Errorf("agent: loop: the request's tool %q has no ToolFunc (functions for: %s)", t.Name, toolNames(tools))
			}
		}
		resp, err := s.Complete()
		if err != nil {
			return err
		}
		calls := resp.ToolCalls()
		if len(calls) == 0 {
			return nil
		}
		if err := s.Admit(calls); err != nil {
			return err
		}
		results := make([]LLMPart, 0, len(calls))
		for _, c := range calls {
			var out string
			fn := tools[c.Name]
			if fn == nil {
				err = fmt.Errorf("no tool named %q (tools: %s)", c.Name, toolNames(tools))
			} else {
				out, err = fn(ctx, c.Arguments)
			}
			if errors.Is(err, ErrBudget) {
				return err
			}
			if err != nil {
				results = append(results, LLMPart{Type: abi.PartToolResult, ID: c.ID, Text: err.Error(), IsError: true})
				continue
			}
			results = append(results, LLMPart{Type: abi.PartToolResult, ID: c.ID, Text: out})
		}
		s.Conversation.Messages = append(s.Conversation.Messages, LLMMessage{Role: abi.RoleUser, Content: results})
		return nil
	}
}

func toolNames(tools map[string]ToolFunc) string {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// inputBound is the host's worst case for the input tokens of req, the
// amount its budget reserves before the call
// (host/caps/llm/provider.EstimateInputTokens, the same rule): the bytes
// of every text, which bound the tokens of any byte-level BPE tokenizer,
// plus overheads per message, part and tool.
func inputBound(req *LLMRequest) uint64 {
	const message, reply, tool, image = 8, 8, 64, 2560
	n := uint64(reply)
	for _, m := range req.Messages {
		n += message
		for _, p := range m.Content {
			n += message / 2
			if p.Type == abi.PartImage {
				n += image
			}
			n += uint64(len(p.Text) + len(p.ID) + len(p.Name) + len(p.Arguments))
		}
	}
	for _, t := range req.Tools {
		n += tool + uint64(len(t.Name)+len(t.Description)+len(t.Schema))
	}
	for _, s := range req.Stop {
		n += uint64(len(s))
	}
	if f := req.Format; f != nil {
		n += tool + uint64(len(f.Name)+len(f.Schema))
	}
	return n
}
