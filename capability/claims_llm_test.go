package capability

import (
	"errors"
	"testing"
)

// TestLLMWithin: a child narrows the providers, the models and the output
// bound of its parent's llm capability, and never widens one.
func TestLLMWithin(t *testing.T) {
	parent := Caps{LLM: &LLM{Providers: []string{"anthropic", "openai"}, Models: []string{"claude-haiku", "gpt-4o-mini"}, MaxOutputTokens: 4096}}
	for _, tc := range []struct {
		name  string
		child *LLM
		ok    bool
	}{
		{"same", &LLM{Providers: []string{"anthropic", "openai"}, Models: []string{"claude-haiku", "gpt-4o-mini"}, MaxOutputTokens: 4096}, true},
		{"narrower", &LLM{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, MaxOutputTokens: 512}, true},
		{"other provider", &LLM{Providers: []string{"ollama"}, Models: []string{"gpt-4o-mini"}, MaxOutputTokens: 512}, false},
		{"other model", &LLM{Providers: []string{"openai"}, Models: []string{"gpt-5"}, MaxOutputTokens: 512}, false},
		{"longer answers", &LLM{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, MaxOutputTokens: 8192}, false},
	} {
		err := Caps{LLM: tc.child}.Within(parent)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrWidens)) {
			t.Errorf("%s: Within = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if err := (Caps{LLM: &LLM{Providers: []string{"openai"}, Models: []string{"m"}}}).Within(Caps{}); err == nil {
		t.Error("an llm capability the parent lacks is within it")
	}
	if err := (Caps{LLM: &LLM{Providers: []string{"openai"}, Models: []string{"m"}}}).Check(); err == nil {
		t.Error("Check accepts max_output_tokens 0")
	}
}
