package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// generation is one reply of a turn to one request, rendered in any API.
type generation struct {
	turn         *Turn
	index        int
	id           string // unique per request: the request's number
	model        string
	usage        Usage
	includeUsage bool
	background   bool
	store        bool
}

// event is one server-sent event; usage marks the one that carries the
// reply's final usage.
type event struct {
	name  string // "" for Chat Completions, whose events have no name
	data  []byte
	usage bool
}

func (e event) bytes() []byte {
	var b strings.Builder
	if e.name != "" {
		b.WriteString("event: " + e.name + "\n")
	}
	b.WriteString("data: ")
	b.Write(e.data)
	b.WriteString("\n\n")
	return []byte(b.String())
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of strings, numbers and raw JSON reach here
	}
	return b
}

// split cuts s into n pieces of nearly equal length in characters.
func split(s string, n int) []string {
	r := []rune(s)
	if n <= 1 || len(r) <= 1 {
		return []string{s}
	}
	n = min(n, len(r))
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		out = append(out, string(r[k*len(r)/n:(k+1)*len(r)/n]))
	}
	return out
}

// splitBytes cuts s into n pieces of nearly equal length in bytes (tool
// arguments are compact JSON; a piece need not be valid alone).
func splitBytes(s string, n int) []string {
	if n <= 1 || len(s) <= 1 {
		return []string{s}
	}
	n = min(n, len(s))
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		out = append(out, s[k*len(s)/n:(k+1)*len(s)/n])
	}
	return out
}

func (g *generation) replyID(api string) string {
	switch api {
	case APIChat:
		return "chatcmpl-fake" + g.id
	case APIResponses:
		return "resp_fake" + g.id
	default:
		return "msg_fake" + g.id
	}
}

// callID is a tool call's id: the script's, or one derived from the turn
// and index, the same in every reply of the turn so that a conversation
// resent after a crash holds the same ids.
func (g *generation) callID(api string, j int) string {
	if id := g.turn.Reply.ToolCalls[j].ID; id != "" {
		return id
	}
	if api == APIMessages {
		return fmt.Sprintf("toolu_fake_%d_%d", g.index, j)
	}
	return fmt.Sprintf("call_fake_%d_%d", g.index, j)
}

// body is the non-streamed answer; status is the Responses status
// ("completed", or "queued" for a background request just accepted).
func (g *generation) body(api, status string) []byte {
	switch api {
	case APIChat:
		return mustJSON(g.chatCompletion())
	case APIResponses:
		return mustJSON(g.response(status))
	default:
		return mustJSON(g.message())
	}
}

func (g *generation) events(api string) []event {
	switch api {
	case APIChat:
		return g.chatEvents()
	case APIResponses:
		return g.responseEvents()
	default:
		return g.messageEvents()
	}
}

// Chat Completions.

func (g *generation) finishReason() string {
	return map[string]string{StopEndTurn: "stop", StopSequence: "stop", StopMaxTokens: "length", StopToolUse: "tool_calls"}[g.turn.Reply.Stop]
}

// chatUsage spells u as Chat Completions does: prompt_tokens include
// the cached tokens and those written to the cache.
func chatUsage(u Usage) map[string]any {
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{
		"prompt_tokens":     in,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      in + u.OutputTokens,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": u.CacheReadTokens, "cache_write_tokens": u.CacheWriteTokens, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": u.ReasoningTokens, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
}

func (g *generation) chatCompletion() map[string]any {
	r := g.turn.Reply
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if r.Text != "" {
		msg["content"] = r.Text
	}
	if len(r.ToolCalls) > 0 {
		var calls []any
		for j, c := range r.ToolCalls {
			calls = append(calls, map[string]any{
				"id": g.callID(APIChat, j), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.args},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": g.replyID(APIChat), "object": "chat.completion", "created": created, "model": g.model,
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": g.finishReason(),
		}},
		"usage": chatUsage(g.usage), "service_tier": "default", "system_fingerprint": "fp_fakellm",
	}
}

func (g *generation) chatEvents() []event {
	r := g.turn.Reply
	var evs []event
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{
			"id": g.replyID(APIChat), "object": "chat.completion.chunk", "created": created, "model": g.model,
			"system_fingerprint": "fp_fakellm", "service_tier": "default",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if g.includeUsage {
			// Every chunk but the last carries "usage": null when usage
			// was asked for, as the API documents.
			c["usage"] = nil
		}
		evs = append(evs, event{data: mustJSON(c)})
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	if r.Text != "" {
		for _, p := range split(r.Text, r.Chunks) {
			chunk(map[string]any{"content": p}, nil)
		}
	}
	for j, c := range r.ToolCalls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": j, "id": g.callID(APIChat, j), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil)
		for _, p := range splitBytes(c.args, c.Chunks) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": j, "function": map[string]any{"arguments": p},
			}}}, nil)
		}
	}
	chunk(map[string]any{}, g.finishReason())
	if g.includeUsage {
		evs = append(evs, event{usage: true, data: mustJSON(map[string]any{
			"id": g.replyID(APIChat), "object": "chat.completion.chunk", "created": created, "model": g.model,
			"system_fingerprint": "fp_fakellm", "service_tier": "default",
			"choices": []any{}, "usage": chatUsage(g.usage),
		})})
	}
	return evs
}

// Responses.

func responsesUsage(u Usage) map[string]any {
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{
		"input_tokens":          in,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadTokens, "cache_write_tokens": u.CacheWriteTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          in + u.OutputTokens,
	}
}

func (g *generation) textItem(status string, text string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = []any{outputText(text)}
	}
	return map[string]any{
		"id": "msg_fake" + g.id, "type": "message", "status": status, "role": "assistant", "content": content,
	}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func (g *generation) callItem(j int, status, args string) map[string]any {
	c := g.turn.Reply.ToolCalls[j]
	return map[string]any{
		"id": fmt.Sprintf("fc_fake%s_%d", g.id, j), "type": "function_call", "status": status,
		"call_id": g.callID(APIResponses, j), "name": c.Name, "arguments": args,
	}
}

// response is the Responses object in status: "queued" and "in_progress"
// have no output and no usage; "completed" has both, and becomes
// "incomplete" for a reply stopped at max_tokens.
func (g *generation) response(status string) map[string]any {
	r := g.turn.Reply
	output := []any{}
	var usage, incomplete any
	if status == "completed" {
		if r.Text != "" {
			output = append(output, g.textItem("completed", r.Text))
		}
		for j, c := range r.ToolCalls {
			output = append(output, g.callItem(j, "completed", c.args))
		}
		usage = responsesUsage(g.usage)
		if r.Stop == StopMaxTokens {
			status = "incomplete"
			incomplete = map[string]any{"reason": "max_output_tokens"}
		}
	}
	return map[string]any{
		"id": g.replyID(APIResponses), "object": "response", "created_at": created, "status": status,
		"background": g.background, "error": nil, "incomplete_details": incomplete,
		"instructions": nil, "max_output_tokens": nil, "model": g.model, "output": output,
		"parallel_tool_calls": true, "previous_response_id": nil, "store": g.store,
		"temperature": 1.0, "top_p": 1.0, "tool_choice": "auto", "tools": []any{}, "truncation": "disabled",
		"usage": usage, "metadata": map[string]any{}, "text": map[string]any{"format": map[string]any{"type": "text"}},
	}
}

func (g *generation) responseEvents() []event {
	r := g.turn.Reply
	var evs []event
	add := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = len(evs)
		evs = append(evs, event{name: typ, data: mustJSON(fields)})
	}
	add("response.created", map[string]any{"response": g.response("in_progress")})
	add("response.in_progress", map[string]any{"response": g.response("in_progress")})
	out := 0
	if r.Text != "" {
		itemID := "msg_fake" + g.id
		add("response.output_item.added", map[string]any{"output_index": out, "item": g.textItem("in_progress", "")})
		add("response.content_part.added", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0, "part": outputText("")})
		for _, p := range split(r.Text, r.Chunks) {
			add("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0, "delta": p, "logprobs": []any{}})
		}
		add("response.output_text.done", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0, "text": r.Text, "logprobs": []any{}})
		add("response.content_part.done", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0, "part": outputText(r.Text)})
		add("response.output_item.done", map[string]any{"output_index": out, "item": g.textItem("completed", r.Text)})
		out++
	}
	for j, c := range r.ToolCalls {
		itemID := fmt.Sprintf("fc_fake%s_%d", g.id, j)
		add("response.output_item.added", map[string]any{"output_index": out, "item": g.callItem(j, "in_progress", "")})
		for _, p := range splitBytes(c.args, c.Chunks) {
			add("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": out, "delta": p})
		}
		add("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": out, "name": c.Name, "arguments": c.args})
		add("response.output_item.done", map[string]any{"output_index": out, "item": g.callItem(j, "completed", c.args)})
		out++
	}
	final := g.response("completed")
	typ := "response.completed"
	if final["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	add(typ, map[string]any{"response": final})
	evs[len(evs)-1].usage = true
	return evs
}

// Anthropic Messages.

func (g *generation) stopReason() string { return g.turn.Reply.Stop }

// stopSequence is the sequence that stopped the reply, or null.
func (g *generation) stopSequence() any {
	if g.turn.Reply.StopSequence == "" {
		return nil
	}
	return g.turn.Reply.StopSequence
}

// messagesUsage spells u as Anthropic does: input_tokens exclude the
// tokens read from and written to the cache.
func messagesUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
		"output_tokens":               u.OutputTokens,
		"output_tokens_details":       map[string]any{"thinking_tokens": u.ReasoningTokens},
	}
}

func (g *generation) message() map[string]any {
	r := g.turn.Reply
	content := []any{}
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for j, c := range r.ToolCalls {
		content = append(content, map[string]any{
			"type": "tool_use", "id": g.callID(APIMessages, j), "name": c.Name, "input": json.RawMessage(c.args),
		})
	}
	u := messagesUsage(g.usage)
	u["service_tier"] = "standard"
	return map[string]any{
		"id": g.replyID(APIMessages), "type": "message", "role": "assistant", "model": g.model,
		"content": content, "stop_reason": g.stopReason(), "stop_sequence": g.stopSequence(), "usage": u,
	}
}

func (g *generation) messageEvents() []event {
	r := g.turn.Reply
	var evs []event
	add := func(typ string, fields map[string]any) {
		fields["type"] = typ
		evs = append(evs, event{name: typ, data: mustJSON(fields)})
	}
	// message_start carries the input counts and a provisional output
	// count; message_delta the cumulative totals. A client that adds
	// the two instead of taking the last overcounts: the fake sends both
	// as the API does so that such a client is caught.
	start := messagesUsage(g.usage)
	start["output_tokens"] = min(g.usage.OutputTokens, 1)
	start["output_tokens_details"] = map[string]any{"thinking_tokens": 0}
	start["service_tier"] = "standard"
	add("message_start", map[string]any{"message": map[string]any{
		"id": g.replyID(APIMessages), "type": "message", "role": "assistant", "model": g.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start,
	}})
	// The documented stream has a ping after the first block starts.
	idx := 0
	ping := func() {
		if idx == 0 {
			add("ping", map[string]any{})
		}
	}
	if r.Text != "" {
		add("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		ping()
		for _, p := range split(r.Text, r.Chunks) {
			add("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": p}})
		}
		add("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for j, c := range r.ToolCalls {
		add("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": g.callID(APIMessages, j), "name": c.Name, "input": map[string]any{},
		}})
		ping()
		for _, p := range splitBytes(c.args, c.Chunks) {
			add("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		add("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	add("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": g.stopReason(), "stop_sequence": g.stopSequence()},
		"usage": messagesUsage(g.usage),
	})
	evs[len(evs)-1].usage = true
	add("message_stop", map[string]any{})
	return evs
}
