package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentrt/agentrt/host/budget"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

const goodYAML = `providers:
  openai:
    kind: openai-chat
    credential: {env: AGENTRT_TEST_OPENAI_KEY}
    retry: {attempts: 4, max_wait: 5s}
    models:
      gpt-4.1-mini: {input: "0.40", output: 1.60, cache_read: 0.1}
  local:
    kind: openai-compatible
    base_url: http://127.0.0.1:11434/v1
    models:
      llama3.2: {input: 0, output: 0}
`

func TestParseConfig(t *testing.T) {
	c, err := Parse("llm.yaml", []byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ProviderNames(); strings.Join(got, ",") != "local,openai" {
		t.Fatalf("names %v", got)
	}
	o := c.Providers["openai"]
	if o.BaseURL != "https://api.openai.com/v1" || o.Retry.Attempts != 4 || o.Credential.ID() != "env:AGENTRT_TEST_OPENAI_KEY" {
		t.Fatalf("openai = %+v", o)
	}
	if p := o.Models["gpt-4.1-mini"]; p.Input != 400_000 || p.Output != 1_600_000 || p.CacheRead != 100_000 || p.CacheWrite != 0 {
		t.Fatalf("prices %+v", p)
	}
	if !o.Allowed("gpt-4.1-mini") || o.Allowed("gpt-5") {
		t.Fatal("Allowed")
	}
	l := c.Providers["local"]
	if l.Credential.ID() != "none" || l.Retry.Attempts != 3 {
		t.Fatalf("local = %+v", l)
	}
	if k, err := l.LoadCredential(); err != nil || k.Key() != "" {
		t.Fatalf("keyless credential: %v", err)
	}
}

func TestParsePrice(t *testing.T) {
	for in, want := range map[string]Price{"0": 0, "2.50": 2_500_000, "0.000001": 1, "15": 15_000_000, "3.0": 3_000_000, "123456789.123456": 123456789123456} {
		got, err := ParsePrice(in)
		if err != nil || got != want {
			t.Errorf("ParsePrice(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1e-3", "-1", "0.1234567", "abc", "1.", ".5", "1,5", "+1", "1234567890"} {
		if _, err := ParsePrice(in); !errors.Is(err, ErrBadPrice) {
			t.Errorf("ParsePrice(%q) err = %v, want ErrBadPrice", in, err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"typo", "providers:\n  o:\n    kind: anthropic\n    modles: {}\n", `llm.yaml:4: unknown key "modles" in providers.o; allowed: kind, base_url, credential, models, timeout, retry, background (did you mean models?)`},
		{"price typo", "providers:\n  o:\n    models:\n      m: {inptu: 1}\n", `unknown key "inptu" in providers.o.models.m; allowed: input, output, cache_read, cache_write`},
		{"float price", "providers:\n  o:\n    kind: anthropic\n    credential: {env: X}\n    models:\n      m: {input: 1e-3}\n", "line 6: \"1e-3\": price must be"},
		{"no providers", "providers: {}\n", "no providers"},
		{"no kind", "providers:\n  o:\n    models: {m: {}}\n", "provider o: kind is missing\nhint: kind is one of"},
		{"bad kind", "providers:\n  o:\n    kind: gemini\n    models: {m: {}}\n", `kind "gemini" is not one of`},
		{"no models", "providers:\n  o:\n    kind: anthropic\n    credential: {env: X}\n", "models is empty"},
		{"no credential", "providers:\n  o:\n    kind: anthropic\n    models: {m: {}}\n", "credential is required for anthropic"},
		{"two sources", "providers:\n  o:\n    kind: anthropic\n    credential: {env: X, file: /k}\n    models: {m: {}}\n", "exactly one of env or file"},
		{"compatible without url", "providers:\n  o:\n    kind: openai-compatible\n    models: {m: {}}\n", "base_url is required"},
		{"bad url", "providers:\n  o:\n    kind: openai-compatible\n    base_url: ftp://x\n    models: {m: {}}\n", "not an http or https URL"},
		{"attempts", "providers:\n  o:\n    kind: openai-compatible\n    base_url: http://x\n    retry: {attempts: 11}\n    models: {m: {}}\n", "retry.attempts 11 is not within 1..10"},
		{"timeout", "providers:\n  o:\n    kind: openai-compatible\n    base_url: http://x\n    timeout: -1s\n    models: {m: {}}\n", "want a positive duration"},
		{"background chat", "providers:\n  o:\n    kind: openai-chat\n    credential: {env: X}\n    background: true\n    models: {m: {}}\n", "background is for kind openai-responses: openai-chat cannot resume a stream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("llm.yaml", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
	_, err := Parse("llm.yaml", []byte(cases[0].doc))
	var uk *yamlkeys.UnknownKeyError
	if !errors.As(err, &uk) || uk.Key != "modles" || uk.Suggestion != "models" {
		t.Fatalf("typo error %#v", err)
	}
}

func TestCredentialFile(t *testing.T) {
	dir := t.TempDir()
	key := "sk-file-0123456789abcdefSECRET"
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf("providers:\n  a:\n    kind: anthropic\n    credential: {file: %s}\n    models: {m: {}}\n", path)
	c, err := Parse("llm.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers["a"]
	_, err = p.LoadCredential()
	if !errors.Is(err, ErrCredentialPerm) || !strings.Contains(err.Error(), "hint: chmod 600 "+path) || !strings.Contains(err.Error(), "mode 0644") {
		t.Fatalf("0644 file: err = %v, want ErrCredentialPerm with a chmod hint", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := p.LoadCredential()
	if err != nil || k.Key() != key || k.ID() != "file:"+path {
		t.Fatalf("0600 file: %v, id %s", err, k.ID())
	}
	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.LoadCredential(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty file: %v", err)
	}
}

// TestKeyNeverPrinted loads a key, prints the credential, the provider and
// the config every way there is, causes every credential error, and looks
// for the key, and for any 8-byte piece of it, in all of that.
func TestKeyNeverPrinted(t *testing.T) {
	const key = "sk-test-Zq9vX3mK7pL2wR8tY4uB6nE1"
	t.Setenv("AGENTRT_TEST_OPENAI_KEY", key)
	c, err := Parse("llm.yaml", []byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Providers["openai"]
	cred, err := p.LoadCredential()
	if err != nil || cred.Key() != key {
		t.Fatalf("load: %v", err)
	}
	holder := struct {
		Cred     Credential
		Ptr      *Credential
		Provider *Provider
	}{cred, &cred, p}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		out = append(out, fmt.Sprintf(verb, cred), fmt.Sprintf(verb, &cred), fmt.Sprintf(verb, holder), fmt.Sprintf(verb, c))
	}
	out = append(out, cred.String(), cred.GoString(), fmt.Sprint(cred), fmt.Sprintln(holder))
	for _, v := range []any{cred, holder, c} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(j), string(y))
	}
	if !strings.Contains(fmt.Sprint(cred), "env:AGENTRT_TEST_OPENAI_KEY") {
		t.Fatalf("the credential prints as %q, want its id", fmt.Sprint(cred))
	}
	// Every error a credential can cause, with the key in the environment.
	for _, src := range []*CredentialSource{{Env: "AGENTRT_TEST_UNSET_VAR"}, {File: filepath.Join(t.TempDir(), "missing")}} {
		q := *p
		q.Credential = src
		_, err := q.LoadCredential()
		if err == nil {
			t.Fatalf("%s: no error", src.ID())
		}
		out = append(out, err.Error(), fmt.Sprintf("%#v", err))
	}
	all := strings.Join(out, "\n")
	for i := 0; i+8 <= len(key); i++ {
		if strings.Contains(all, key[i:i+8]) {
			t.Fatalf("a piece of the key (%q) was printed in:\n%s", key[i:i+8], all)
		}
	}
}

// TestPriceCosts: llm.yaml's prices, as the ledger takes them, cost what
// the table says, rounded up to the micro-USD.
func TestPriceCosts(t *testing.T) {
	cfg, err := Parse("llm.yaml", []byte("providers:\n  o:\n    kind: anthropic\n    credential: {env: X}\n    models:\n      m: {input: \"2.50\", output: \"10\", cache_read: \"1.25\", cache_write: \"3.75\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers["o"].Models["m"].Price()
	if p != (budget.Price{Input: 2_500_000, Output: 10_000_000, CacheRead: 1_250_000, CacheWrite: 3_750_000}) {
		t.Fatalf("price %+v", p)
	}
	for _, c := range []struct {
		u    budget.Usage
		want uint64
	}{
		{budget.Usage{}, 0},
		{budget.Usage{Input: 1_000_000}, 2_500_000},
		{budget.Usage{Input: 1}, 3}, // 2.5 micro-USD rounds up
		{budget.Usage{Input: 1000, Output: 500, CacheRead: 2000, CacheWrite: 400}, 2500 + 5000 + 2500 + 1500},
	} {
		if got, err := p.Cost(c.u); err != nil || got != c.want {
			t.Errorf("Cost(%+v) = %d, %v; want %d", c.u, got, err, c.want)
		}
	}
}

func TestEstimateInputTokens(t *testing.T) {
	text := strings.Repeat("naïve 世界 ", 100) // multibyte: more bytes than runes
	req := &abi.LLMRequest{Model: "m", MaxOutputTokens: 1, Messages: []abi.LLMMessage{
		{Role: abi.RoleUser, Content: []abi.LLMPart{{Type: abi.PartText, Text: text}}},
	}}
	base := EstimateInputTokens(req)
	if want := uint64(ReplyOverhead + MessageOverhead + MessageOverhead/2 + len(text)); base != want {
		t.Fatalf("estimate %d, want %d (bytes of the text plus overheads)", base, want)
	}
	req.Messages[0].Content = append(req.Messages[0].Content, abi.LLMPart{Type: abi.PartImage, SHA256: make([]byte, 32), MediaType: "image/png"})
	withImage := EstimateInputTokens(req)
	if withImage != base+ImageTokens+MessageOverhead/2 {
		t.Fatalf("an image adds %d, want %d", withImage-base, ImageTokens+MessageOverhead/2)
	}
	schema := []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	req.Tools = []abi.LLMTool{{Name: "search", Description: "web search", Schema: schema}}
	if got := EstimateInputTokens(req) - withImage; got != uint64(ToolOverhead+len("search")+len("web search")+len(schema)) {
		t.Fatalf("a tool adds %d", got)
	}
}
