// Package fakellm is a fake model provider for tests, the demo and the
// benchmarks: a real HTTP server that speaks OpenAI Chat Completions
// (POST /v1/chat/completions), OpenAI Responses (POST /v1/responses,
// GET /v1/responses/{id}) and Anthropic Messages (POST /v1/messages),
// streamed and not, from a Script of turns, and that records every
// request it is sent. It must never be mistaken for a model: it answers
// only what its script says.
//
// # Script
//
// A script (YAML or JSON; see Script) names the API key it requires and
// its turns. Each turn gives the reply (text in N chunks, tool calls with
// JSON arguments, a stop reason), the usage it reports, what the request
// must contain (Expect) and the faults met by its first attempts (an
// error status with Retry-After, a delay, malformed JSON, a connection
// cut in the middle of an event, an error event mid-stream).
//
// # Matching
//
// Under "match: order" (the default) each new call gets the next turn.
// A call is recognised by its MatchKey, the SHA-256 of its body as
// canonical JSON without stream, stream_options and background: a call
// sent again (a retry after a 429, or a resumed run's call left in
// doubt, streamed or not) gets the same turn, and so the same reply,
// rather than the next one. Each attempt at a turn meets the next of
// its faults, so "faults: [{status: 429}]" fails the first attempt and
// answers the second. A request that does not satisfy its turn's
// Expect gets a 400 that names the difference, and does not use the turn
// up. Under "match: key" a request gets the turn whose key equals the
// text of its last message, however often it is sent.
//
// Replies are the same bytes for every attempt at a turn but for their
// ids: a reply's id (chatcmpl-fakeN, resp_fakeN, msg_fakeN) carries the
// request's number N, as a real provider's ids differ per generation;
// tool call ids (call_fake_T_J, toolu_fake_T_J, or the script's) carry
// the turn T, so a conversation resent after a crash holds the same ids.
// Timestamps are fixed.
//
// # Usage
//
// A turn's usage is written once, in neutral disjoint counts, and spelt
// by each API as it documents, the same whether streamed or not:
//
//	neutral              chat completions                         responses                                 messages
//	input_tokens         prompt_tokens - cached - cache_write     input_tokens - cached - cache_write       input_tokens
//	cache_read_tokens    prompt_tokens_details.cached_tokens      input_tokens_details.cached_tokens        cache_read_input_tokens
//	cache_write_tokens   prompt_tokens_details.cache_write_tokens input_tokens_details.cache_write_tokens   cache_creation_input_tokens
//	output_tokens        completion_tokens                        output_tokens                             output_tokens
//	reasoning_tokens     completion_tokens_details.reasoning_...  output_tokens_details.reasoning_tokens    output_tokens_details.thinking_tokens
//
// A Chat Completions stream carries usage only when the request asks
// for it (stream_options.include_usage), in a last chunk with no
// choices. A Responses stream carries it in response.completed. An
// Anthropic stream carries the input counts and output_tokens 1 in
// message_start and the cumulative totals in message_delta.
//
// # Counting
//
// Stats (and GET /_fake/stats, the same as JSON) lists every request:
// API, model, whether streamed, the body's hash, the turn and attempt,
// the outcome and the usage the answer carried, recorded only when the
// bytes that carry it were written whole. Stats.Usage is their sum,
// counting a stored response's usage once however often it is
// retrieved. Stats.ResentAfterCompletion names calls sent again after a
// complete answer. Of the headers only Idempotency-Key is recorded, so
// the API key is never in the stats.
//
// # Auth
//
// The OpenAI APIs take the key as Authorization: Bearer only. Anthropic's
// takes it as x-api-key or, when that is absent, as Authorization: Bearer
// (anthropic-sdk-go v2 sends it so), and wants an anthropic-version
// header. A request without the key where its API reads it gets 401 in
// the API's error shape; Request.KeyHeader says which header carried it.
//
// # Stored and background responses
//
// A Responses reply is kept by id unless the request says store: false,
// and GET /v1/responses/{id} returns it completed. One created with
// background: true (which must be stored) may also be streamed again:
// its events carry sequence numbers from 0, and GET
// /v1/responses/{id}?stream=true&starting_after=N (or {"stream": true}
// in the body, as openai-go sends it) resumes the stream after event N,
// at once and without the turn's delays or faults. A background request
// not streamed is answered "queued".
package fakellm
