package provider

import "github.com/agentrt/agentrt/abi"

// Overheads of EstimateInputTokens, in tokens. They are generous on
// purpose: the estimate is a reservation that the call's real usage
// settles, so overshooting only holds budget back for the call's
// duration, while undershooting could let a run overspend.
const (
	// MessageOverhead covers a message's role and template tokens
	// (OpenAI documents 3 or 4; Anthropic's template is of the same size).
	MessageOverhead = 8
	// ReplyOverhead covers the tokens that prime the assistant's reply.
	ReplyOverhead = 8
	// ToolOverhead covers the text a provider wraps around each tool
	// definition when it renders it into the prompt.
	ToolOverhead = 64
	// ImageTokens bounds one image: OpenAI's high-detail tiling tops out
	// near 1 500 tokens (2 500 for the patch-based models), Anthropic's
	// resize to 1.15 megapixels near 1 600.
	ImageTokens = 2560
)

// EstimateInputTokens returns an upper bound on the input tokens req
// costs, without a tokenizer: the byte length of every text the request
// carries (texts, tool names, descriptions, schemas, arguments, results,
// stop sequences and the format's schema), plus the overheads above.
//
// Why bytes bound tokens: OpenAI's tokenizers (cl100k, o200k) and
// Anthropic's are byte-level BPE: every token stands for at least one
// byte of the UTF-8 text, so a text of n bytes is at most n tokens, for
// any model, whichever tokenizer it uses. The bound is loose (English runs
// near 4 bytes a token), which is the price of being one without a
// tokenizer per model; the budget settles to the usage the provider
// reports. A tokenizer that gives a tighter count would not be a bound for
// Anthropic models, whose tokenizer is not public.
func EstimateInputTokens(req *abi.LLMRequest) uint64 {
	n := uint64(ReplyOverhead)
	for _, m := range req.Messages {
		n += MessageOverhead
		for _, p := range m.Content {
			n += MessageOverhead / 2
			if p.Type == abi.PartImage {
				n += ImageTokens
			}
			n += uint64(len(p.Text) + len(p.ID) + len(p.Name) + len(p.Arguments))
		}
	}
	for _, t := range req.Tools {
		n += ToolOverhead + uint64(len(t.Name)+len(t.Description)+len(t.Schema))
	}
	for _, s := range req.Stop {
		n += uint64(len(s))
	}
	if f := req.Format; f != nil {
		n += ToolOverhead + uint64(len(f.Name)+len(f.Schema))
	}
	return n
}
