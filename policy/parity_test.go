package policy

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"time"

	"encoding/json"
	"fmt"
	"github.com/agentrt/agentrt/capability"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

// The parity corpus: testdata/parity/*.json, in the format README.md there
// describes. The expected values in the files are written by hand from the
// rules in doc.go; there is deliberately no flag that rewrites them from
// what the code does.

const parityDir = "testdata/parity"

// fixture is one corpus file.
type fixture struct {
	Description   string            `json:"description"`
	Platform      []fixtureSource   `json:"platform,omitempty"`
	Customer      []fixtureSource   `json:"customer,omitempty"`
	Modes         *string           `json:"modes,omitempty"`
	EntitiesFiles []string          `json:"entities_files,omitempty"`
	Entities      json.RawMessage   `json:"entities,omitempty"`
	Context       json.RawMessage   `json:"context,omitempty"`
	LoadError     *fixtureLoadError `json:"load_error,omitempty"`
	Requests      []fixtureRequest  `json:"requests,omitempty"`
	// TokenRoots, Cell and Now are how the tokens of the fixture's
	// requests are verified: the trusted root keys and the verifying
	// cell's key (hex), and the time (RFC 3339).
	TokenRoots []string `json:"token_roots,omitempty"`
	Cell       string   `json:"cell,omitempty"`
	Now        string   `json:"now,omitempty"`
}

type fixtureSource struct {
	File string `json:"file,omitempty"`
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`
}

type fixtureLoadError struct {
	Set      string           `json:"set"`
	Problems []fixtureProblem `json:"problems"`
}

type fixtureProblem struct {
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Policy string `json:"policy,omitempty"`
}

type fixtureRequest struct {
	Description string          `json:"description"`
	Principal   json.RawMessage `json:"principal"`
	Action      string          `json:"action"`
	Resource    json.RawMessage `json:"resource"`
	Context     json.RawMessage `json:"context,omitempty"`
	Entities    json.RawMessage `json:"entities,omitempty"`
	// Token is a token file (tokens/NAME.cbor): the gate's capability
	// layers run first, the token's verification and its claims' check of
	// the action and resource (rule 0 of README.md).
	Token  string        `json:"token,omitempty"`
	Expect fixtureExpect `json:"expect"`
}

type fixtureExpect struct {
	Allowed     *bool    `json:"allowed"`
	By          By       `json:"by"`
	Determining []string `json:"determining"`
	Errors      []string `json:"errors"`
	Mode        Effect   `json:"mode,omitempty"`
	ModeRule    string   `json:"mode_rule,omitempty"`
	// Reason is, for a denial by token, the failure class of the token's
	// verification (capability/SPEC.md, e.g. "expired").
	Reason string `json:"reason,omitempty"`
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func readFixture(t testing.TB, path string) fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := decodeStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// sources resolves a fixture's policy sources; files are relative to the
// fixture and named by their base name.
func sources(t testing.TB, dir string, fs []fixtureSource) []Source {
	t.Helper()
	var out []Source
	for _, s := range fs {
		switch {
		case s.File != "" && s.Text == "" && s.Name == "":
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(s.File)))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, Source{Name: filepath.Base(s.File), Text: b})
		case s.File == "" && s.Name != "":
			out = append(out, Source{Name: s.Name, Text: []byte(s.Text)})
		default:
			t.Fatalf("a source is {file} or {name, text}: %+v", s)
		}
	}
	return out
}

// platformSources are the fixture's platform sources, or the embedded
// defaults when it names none.
func platformSources(t testing.TB, f fixture) []Source {
	if f.Platform == nil {
		return Platform()
	}
	return sources(t, parityDir, f.Platform)
}

// entities merges the fixture's entity files, its inline entities and the
// request's, later ones replacing earlier ones with the same uid.
func entities(t testing.TB, f fixture, extra json.RawMessage) json.RawMessage {
	t.Helper()
	all := map[string]json.RawMessage{}
	add := func(raw json.RawMessage) {
		if len(raw) == 0 {
			return
		}
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			var ent types.Entity
			if err := ent.UnmarshalJSON(e); err != nil {
				t.Fatalf("entity %s: %v", e, err)
			}
			all[ent.UID.String()] = e
		}
	}
	for _, name := range f.EntitiesFiles {
		b, err := os.ReadFile(filepath.Join(parityDir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	add(f.Entities)
	add(extra)
	list := make([]json.RawMessage, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		list = append(list, all[k])
	}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mergeContext overlays the request's context members on the fixture's.
func mergeContext(t testing.TB, base, over json.RawMessage) json.RawMessage {
	t.Helper()
	m := map[string]json.RawMessage{}
	for _, raw := range []json.RawMessage{base, over} {
		if len(raw) == 0 {
			continue
		}
		var part map[string]json.RawMessage
		if err := json.Unmarshal(raw, &part); err != nil {
			t.Fatal(err)
		}
		maps.Copy(m, part)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f fixture) request(t testing.TB, r fixtureRequest) Request {
	t.Helper()
	req, err := RequestJSON{
		Principal: r.Principal, Action: r.Action, Resource: r.Resource,
		Context: mergeContext(t, f.Context, r.Context), Entities: entities(t, f, r.Entities),
	}.Request()
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func fixtureFiles(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join(parityDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no parity fixtures")
	}
	return files
}

// TestParity runs every case of the corpus.
func TestParity(t *testing.T) {
	cases := 0
	for _, path := range fixtureFiles(t) {
		f := readFixture(t, path)
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			e, err := NewEngine(platformSources(t, f), sources(t, parityDir, f.Customer))
			if f.LoadError != nil {
				checkLoadError(t, err, *f.LoadError)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var modes *Modes
			if f.Modes != nil {
				if modes, err = ParseModes([]byte(*f.Modes)); err != nil {
					t.Fatal(err)
				}
			}
			for i, r := range f.Requests {
				t.Run(fmt.Sprintf("%02d", i), func(t *testing.T) {
					req := f.request(t, r)
					if r.Token != "" && !tokenLayers(t, f, r, req) {
						return
					}
					checkDecision(t, r, req, e.Decide(req), modes)
				})
			}
		})
		cases += len(f.Requests)
		if f.LoadError != nil {
			cases++
		}
	}
	t.Logf("%d parity cases", cases)
}

func checkDecision(t *testing.T, r fixtureRequest, req Request, d Decision, modes *Modes) {
	t.Helper()
	x := r.Expect
	if x.Allowed == nil || x.By == "" {
		t.Fatalf("%s: expect.allowed and expect.by are required", r.Description)
	}
	got := fmt.Sprintf("allowed=%v by=%s determining=%q errors=%q", d.Allowed, d.By, d.Determining, d.ErrorIDs())
	want := fmt.Sprintf("allowed=%v by=%s determining=%q errors=%q", *x.Allowed, x.By, nonNil(x.Determining), nonNil(x.Errors))
	if got != want {
		t.Errorf("%s:\n got  %s\n want %s\n%s", r.Description, got, want, d.Explain())
	}
	if x.Mode != "" {
		if modes == nil {
			t.Fatalf("%s: expect.mode without modes", r.Description)
		}
		v := modes.Apply(d, CallOf(req))
		if v.Effect != x.Mode || v.Rule != x.ModeRule {
			t.Errorf("%s: modes: got %s (rule %q), want %s (rule %q)", r.Description, v.Effect, v.Rule, x.Mode, x.ModeRule)
		}
	} else if modes != nil {
		t.Errorf("%s: the fixture has modes: expect.mode is required", r.Description)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func checkLoadError(t *testing.T, err error, want fixtureLoadError) {
	t.Helper()
	le, ok := err.(*LoadError)
	if !ok {
		t.Fatalf("want a *LoadError, got %v", err)
	}
	if le.Set != want.Set {
		t.Errorf("load error in the %s set, want %s: %v", le.Set, want.Set, le)
	}
	// Each distinct (file, line, policy) once: the validator may report
	// several problems with one policy, and implementations word and count
	// them differently.
	var got []fixtureProblem
	for _, p := range le.Problems {
		fp := fixtureProblem{File: p.File, Policy: p.Policy, Line: p.Line}
		if !slices.Contains(got, fp) {
			got = append(got, fp)
		}
	}
	if !slices.Equal(got, want.Problems) {
		t.Errorf("problems:\n got  %+v\n want %+v\n%v", got, want.Problems, le)
	}
}

// tokenLayers runs the gate's capability layers on a request with a token:
// the token's verification, then its claims' check of the action's family
// and the resource. It reports whether the request passed them (and goes on
// to the policy); a denial is checked against the expectation here.
func tokenLayers(t *testing.T, f fixture, r fixtureRequest, req Request) bool {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(parityDir, filepath.FromSlash(r.Token)))
	if err != nil {
		t.Fatal(err)
	}
	var roots []ed25519.PublicKey
	for _, h := range f.TokenRoots {
		roots = append(roots, ed25519.PublicKey(unhexKey(t, h)))
	}
	now, err := time.Parse(time.RFC3339, f.Now)
	if err != nil {
		t.Fatalf("fixture now %q: %v", f.Now, err)
	}
	deny := func(by By, reason string) bool {
		x := r.Expect
		if x.Allowed == nil || *x.Allowed || x.By != by || !strings.Contains(reason, x.Reason) {
			t.Errorf("%s: the %s layer denied (%s); want allowed=%v by=%s reason %q", r.Description, by, reason, deref(x.Allowed), x.By, x.Reason)
		}
		return false
	}
	// Each request stands for a run presenting its token once: no nonce
	// cache across requests (the replay check is capability's own test).
	v, err := capability.Verify(tok, roots, capability.Options{Now: now, Audience: unhexKey(t, f.Cell)})
	if err != nil {
		var ce *capability.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v", r.Description, err)
		}
		return deny(ByToken, ce.Class.Error())
	}
	if reason := CapabilityAllows(v.Claims.Caps, req); reason != "" {
		return deny(ByCapability, reason)
	}
	return true
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

func unhexKey(t *testing.T, h string) []byte {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.PublicKeySize {
		t.Fatalf("key %q is not 32 bytes of hex", h)
	}
	return b
}
