// Package synthconv generates a synthetic model conversation for tests and
// benchmarks of content-addressed payloads (journal/SPEC.md section 15):
// calls whose requests resend the whole history plus one new user
// message, and whose responses are the assistant's next message, in
// canonical CBOR. The text is deterministic pseudo-random words, about 4
// bytes per token, as model tokenizers average on English text.
package synthconv

import (
	"math/rand/v2"
	"strings"

	"github.com/agentrt/agentrt/abi"
)

// Message is one message of the conversation.
type Message struct {
	Role    string `cbor:"role"`
	Content string `cbor:"content"`
}

// Request is a call's request: the whole history and the new message.
type Request struct {
	Model     string    `cbor:"model"`
	Messages  []Message `cbor:"messages"`
	MaxTokens uint64    `cbor:"max_tokens"`
}

// Response is a call's response: the assistant's message.
type Response struct {
	Content    string `cbor:"content"`
	StopReason string `cbor:"stop_reason"`
}

// Conversation is calls calls that together send the model a history
// growing to about tokens tokens.
type Conversation struct {
	System string
	Users  []string
	Assist []string
}

// BytesPerToken is the text a token stands for here.
const BytesPerToken = 4

var words = strings.Fields(`the of and to in is that for it as with was on be by this are from at or an which
have not but had they his were one all we can her has there been if more when will would who so no
agent journal model tool call result memory blob hash request response durable replay audit`)

func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()[:n]
}

// New returns a conversation of calls calls whose last request holds about
// tokens tokens: each call adds a user message of a quarter and an
// assistant message of three quarters of tokens/calls.
func New(calls, tokens int, seed uint64) *Conversation {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	per := tokens * BytesPerToken / calls
	c := &Conversation{System: text(r, 1200)}
	for range calls {
		c.Users = append(c.Users, text(r, per/4))
		c.Assist = append(c.Assist, text(r, per-per/4))
	}
	return c
}

// Calls is the number of calls.
func (c *Conversation) Calls() int { return len(c.Users) }

// Request returns the canonical CBOR request of call i (from 0): the
// system message, every earlier exchange and user message i.
func (c *Conversation) Request(i int) []byte {
	msgs := []Message{{Role: "system", Content: c.System}}
	for j := range i {
		msgs = append(msgs, Message{"user", c.Users[j]}, Message{"assistant", c.Assist[j]})
	}
	msgs = append(msgs, Message{"user", c.Users[i]})
	b, err := abi.Marshal(&Request{Model: "synthetic-1", Messages: msgs, MaxTokens: 4096})
	if err != nil {
		panic(err)
	}
	return b
}

// Response returns the canonical CBOR response of call i.
func (c *Conversation) Response(i int) []byte {
	b, err := abi.Marshal(&Response{Content: c.Assist[i], StopReason: "end_turn"})
	if err != nil {
		panic(err)
	}
	return b
}
