// Package provider holds what the llm capability needs of the model
// providers a cell is configured for: the cell's DATA/llm.yaml (kinds,
// base URLs, allowed models, prices, credential sources, timeouts and
// retries), the clients that speak each provider's API (Chat Completions,
// Responses, Anthropic Messages, and Chat Completions at any compatible
// server), and an offline upper bound on a request's input tokens for the
// budget's reservation.
//
// The capability calls it as
//
//	cfg, err := provider.Load(filepath.Join(dataDir, provider.FileName))
//	p := cfg.Providers[name]
//	cred, err := p.LoadCredential()          // journal cred.ID(), never the key
//	c, err := provider.New(p, cred, httpClient, images)
//	reserve := provider.EstimateInputTokens(req), req.MaxOutputTokens, p.Models[req.Model]
//	res, err := c.Complete(ctx, req, onChunk) // onChunk nil: not streamed
//	for _, a := range res.Attempts { settle a.Usage at p.Models[req.Model].Cost }
//
// Complete sends nothing for a request that fails abi.LLMRequest.Validate,
// names a model the provider does not allow, or asks for what the API
// cannot carry (ErrUnsupported). Its errors are *Error values whose Kind is
// the prefix the guest sees (abi/SPEC.md §13.4).
//
// It imports nothing of host/. It must never let an API key reach an
// error, a log line, a String, GoString or Format output, or JSON: a key is
// held only by a Credential, whose every printed form is its id, and is
// written only into the one request header its API reads.
package provider

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// Kind is the wire API a provider speaks.
type Kind string

// The kinds of provider.
const (
	OpenAIChat       Kind = "openai-chat"       // OpenAI Chat Completions
	OpenAIResponses  Kind = "openai-responses"  // OpenAI Responses
	Anthropic        Kind = "anthropic"         // Anthropic Messages
	OpenAICompatible Kind = "openai-compatible" // Chat Completions at a base URL: Ollama, vLLM, llama.cpp
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{OpenAIChat, OpenAIResponses, Anthropic, OpenAICompatible}

// FileName is the configuration's name in the cell's data directory.
const FileName = "llm.yaml"

// MaxAttempts bounds retry.attempts: every attempt costs.
const MaxAttempts = 10

// Config is a parsed llm.yaml.
type Config struct {
	Providers map[string]*Provider `yaml:"providers"`
}

// Provider is one provider entry.
type Provider struct {
	Name       string                `yaml:"-"`
	Kind       Kind                  `yaml:"kind"`
	BaseURL    string                `yaml:"base_url"`
	Credential *CredentialSource     `yaml:"credential"`
	Models     map[string]ModelPrice `yaml:"models"`
	Timeout    Duration              `yaml:"timeout"`
	Retry      Retry                 `yaml:"retry"`
	// Background makes the streamed calls of an openai-responses provider
	// background responses, which OpenAI stores (its data retention
	// applies), so that a stream the cell lost (a crash, a takeover) is
	// resumed where the journal left it instead of failing with
	// stream_interrupted.
	Background bool `yaml:"background"`
}

// Retry says how often a failed call (429, 5xx, a timeout, no
// connection) is tried in all, and the longest Retry-After the client
// waits; a provider asking for more ends the call as rate limited.
type Retry struct {
	Attempts int      `yaml:"attempts"`
	MaxWait  Duration `yaml:"max_wait"`
}

// ModelPrice is a model's price table, in micro-USD per million tokens.
type ModelPrice struct {
	Input      Price `yaml:"input"`
	Output     Price `yaml:"output"`
	CacheRead  Price `yaml:"cache_read"`
	CacheWrite Price `yaml:"cache_write"`
}

// Price is a price in micro-USD per million tokens, parsed exactly from a
// decimal USD amount ("2.50" is 2 500 000): no float ever holds money.
type Price uint64

// ErrBadPrice is returned by ParsePrice for a price that is not a plain
// non-negative decimal of at most 6 fractional digits.
var ErrBadPrice = errors.New("price must be a decimal USD amount per million tokens, like 2.50, with at most 6 decimals")

// ParsePrice parses a USD amount per million tokens into micro-USD.
func ParsePrice(s string) (Price, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 9 || (dot && (frac == "" || len(frac) > 6)) {
		return 0, fmt.Errorf("%q: %w", s, ErrBadPrice)
	}
	var v uint64
	for _, c := range whole + frac + strings.Repeat("0", 6-len(frac)) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: %w", s, ErrBadPrice)
		}
		v = v*10 + uint64(c-'0')
	}
	return Price(v), nil
}

// UnmarshalYAML reads the scalar's text, never a float.
func (p *Price) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %w", n.Line, ErrBadPrice)
	}
	v, err := ParsePrice(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*p = v
	return nil
}

// Duration is a time.Duration written as "30s".
type Duration time.Duration

// UnmarshalYAML parses a Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		return fmt.Errorf("line %d: duration %q: want a positive duration like 30s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// CredentialSource says where a provider's key comes from: exactly one of
// an environment variable or a file (0600 or stricter).
type CredentialSource struct {
	Env  string `yaml:"env"`
	File string `yaml:"file"`
}

// ID is the credential's name for the journal, "env:VAR" or "file:PATH":
// it says where the key came from and nothing of the key.
func (c *CredentialSource) ID() string {
	if c == nil {
		return "none"
	}
	if c.Env != "" {
		return "env:" + c.Env
	}
	return "file:" + c.File
}

// ConfigError is a problem of llm.yaml, with what to change.
type ConfigError struct {
	File string
	Msg  string
	Hint string
	// Err is the sentinel the problem matches, if any (ErrCredentialPerm).
	Err error
}

func (e *ConfigError) Unwrap() error { return e.Err }

func (e *ConfigError) Error() string {
	s := e.File + ": " + e.Msg
	if e.Hint != "" {
		s += "\nhint: " + e.Hint
	}
	return s
}

// ErrCredentialPerm is wrapped by Load's error for a key file that others
// may read.
var ErrCredentialPerm = errors.New("credential file is readable by others")

// Load reads and validates DATA/llm.yaml. It does not read credentials:
// Provider.Credential does, when a client is made.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse parses and validates an llm.yaml document; name is its file name
// for errors.
func Parse(name string, doc []byte) (*Config, error) {
	if err := yamlkeys.Check(doc, reflect.TypeOf(Config{})); err != nil {
		var uk *yamlkeys.UnknownKeyError
		if errors.As(err, &uk) {
			uk.File = name
		}
		return nil, err
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, &ConfigError{File: name, Msg: err.Error()}
	}
	if len(c.Providers) == 0 {
		return nil, &ConfigError{File: name, Msg: "no providers", Hint: "add providers: {NAME: {kind: openai-chat, base_url: ..., credential: {env: VAR}, models: {...}}}"}
	}
	for _, n := range c.ProviderNames() {
		p := c.Providers[n]
		if p == nil {
			return nil, &ConfigError{File: name, Msg: fmt.Sprintf("provider %s is empty", n)}
		}
		p.Name = n
		if err := p.validate(); err != nil {
			return nil, &ConfigError{File: name, Msg: fmt.Sprintf("provider %s: %v", n, err), Hint: hintFor(err)}
		}
	}
	return &c, nil
}

// ProviderNames returns the providers' names, sorted.
func (c *Config) ProviderNames() []string {
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var errNoKind = errors.New("kind is missing")

func hintFor(err error) string {
	switch {
	case errors.Is(err, errNoKind):
		return "kind is one of openai-chat, openai-responses, anthropic, openai-compatible"
	}
	return ""
}

func (p *Provider) validate() error {
	switch p.Kind {
	case "":
		return errNoKind
	case OpenAIChat, OpenAIResponses, Anthropic, OpenAICompatible:
	default:
		return fmt.Errorf("kind %q is not one of openai-chat, openai-responses, anthropic, openai-compatible", p.Kind)
	}
	if p.BaseURL == "" {
		switch p.Kind {
		case OpenAIChat, OpenAIResponses:
			p.BaseURL = "https://api.openai.com/v1"
		case Anthropic:
			p.BaseURL = "https://api.anthropic.com"
		default:
			return errors.New("base_url is required for openai-compatible (e.g. http://127.0.0.1:11434/v1 for Ollama)")
		}
	}
	if !strings.HasPrefix(p.BaseURL, "https://") && !strings.HasPrefix(p.BaseURL, "http://") {
		return fmt.Errorf("base_url %q is not an http or https URL", p.BaseURL)
	}
	if len(p.Models) == 0 {
		return errors.New("models is empty: list the models allowed, each with its prices")
	}
	if p.Background && p.Kind != OpenAIResponses {
		return fmt.Errorf("background is for kind openai-responses: %s cannot resume a stream", p.Kind)
	}
	if c := p.Credential; c != nil {
		if (c.Env == "") == (c.File == "") {
			return errors.New("credential takes exactly one of env or file")
		}
	} else if p.Kind != OpenAICompatible {
		return fmt.Errorf("credential is required for %s (credential: {env: VAR} or {file: PATH})", p.Kind)
	}
	if p.Retry.Attempts == 0 {
		p.Retry.Attempts = 3
	}
	if p.Retry.Attempts < 1 || p.Retry.Attempts > MaxAttempts {
		return fmt.Errorf("retry.attempts %d is not within 1..%d", p.Retry.Attempts, MaxAttempts)
	}
	if p.Retry.MaxWait == 0 {
		p.Retry.MaxWait = Duration(30 * time.Second)
	}
	if p.Timeout == 0 {
		p.Timeout = Duration(120 * time.Second)
	}
	return nil
}

// ModelNames returns p's models, sorted.
func (p *Provider) ModelNames() []string {
	names := make([]string, 0, len(p.Models))
	for n := range p.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Allowed reports whether model is one of p's models.
func (p *Provider) Allowed(model string) bool {
	_, ok := p.Models[model]
	return ok
}

// Credential is a loaded key. Every printed form of it is its id.
type Credential struct {
	id  string
	key string
}

// ID is the credential's id for the journal.
func (c Credential) ID() string { return c.id }

// Key returns the key, for the one request header that carries it.
func (c Credential) Key() string { return c.key }

func (c Credential) String() string               { return "credential(" + c.id + ")" }
func (c Credential) GoString() string             { return c.String() }
func (c Credential) Format(f fmt.State, _ rune)   { fmt.Fprint(f, c.String()) }
func (c Credential) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", c.String())), nil }
func (c Credential) MarshalYAML() (any, error)    { return c.String(), nil }

// Credential loads the provider's key from its source. An
// openai-compatible provider without a source has the empty key.
func (p *Provider) LoadCredential() (Credential, error) {
	src := p.Credential
	if src == nil {
		return Credential{id: "none"}, nil
	}
	if src.Env != "" {
		k, ok := os.LookupEnv(src.Env)
		if !ok || strings.TrimSpace(k) == "" {
			return Credential{}, &ConfigError{File: FileName, Msg: fmt.Sprintf("provider %s: environment variable %s is not set", p.Name, src.Env), Hint: "export " + src.Env + " in the cell's environment"}
		}
		return Credential{id: src.ID(), key: strings.TrimSpace(k)}, nil
	}
	fi, err := os.Stat(src.File)
	if err != nil {
		return Credential{}, &ConfigError{File: FileName, Msg: fmt.Sprintf("provider %s: credential file: %v", p.Name, err)}
	}
	// Windows has no POSIX mode bits to check; its ACLs are the user's.
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return Credential{}, &ConfigError{File: FileName, Msg: fmt.Sprintf("provider %s: %v: %s has mode %#o", p.Name, ErrCredentialPerm, src.File, fi.Mode().Perm()), Hint: "chmod 600 " + src.File, Err: ErrCredentialPerm}
	}
	b, err := os.ReadFile(src.File)
	if err != nil {
		return Credential{}, &ConfigError{File: FileName, Msg: fmt.Sprintf("provider %s: credential file: %v", p.Name, err)}
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return Credential{}, &ConfigError{File: FileName, Msg: fmt.Sprintf("provider %s: credential file %s is empty", p.Name, src.File)}
	}
	return Credential{id: src.ID(), key: k}, nil
}
