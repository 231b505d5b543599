package policy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrt/agentrt/abi"
	"github.com/cedar-policy/cedar-go/types"
	"github.com/fxamacker/cbor/v2"
)

// TestSchemaActionsMatchABI: one action per ABI op, each in its capability
// group and in the class group abi gives it, so a policy on
// Action::"effect" covers exactly the effectful ops.
func TestSchemaActionsMatchABI(t *testing.T) {
	var want []string
	class := map[string]abi.Class{}
	for _, op := range abi.Ops {
		want = append(want, op.Name)
		class[op.Name] = op.Class
	}
	slices.Sort(want)
	if got := Actions(); !slices.Equal(got, want) {
		t.Fatalf("actions %q, want %q", got, want)
	}
	for _, name := range want {
		uid := theSchema.actions[name]
		parents := theSchema.entities[uid].Parents
		capGroup := types.NewEntityUID(actionType, types.String(name[:strings.IndexByte(name, '.')]))
		if !parents.Contains(capGroup) {
			t.Errorf("%s is not in group %s", name, capGroup)
		}
		pure := parents.Contains(types.NewEntityUID(actionType, "pure"))
		effect := parents.Contains(types.NewEntityUID(actionType, "effect"))
		if pure != (class[name] == abi.Pure) || effect != (class[name] == abi.Effect) {
			t.Errorf("%s: in pure %v, effect %v; abi class %v", name, pure, effect, class[name])
		}
	}
}

// TestPlatformDefaults: the embedded set loads against the schema with the
// ids the documentation and the fixtures name.
func TestPlatformDefaults(t *testing.T) {
	e, err := NewEngine(Platform(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"platform.allow-granted", PolicyIPv4InIPv6, PolicyLinkLocal, PolicyLoopback,
		PolicyMetadataAddrs, "platform.deny-metadata-hosts", PolicyMulticast, PolicyNAT64,
		PolicyPrivate, PolicyUnspecified,
		"platform.known-mode", "platform.namespace-clearance", "platform.tool-clearance",
	}
	if got := e.platform.IDs(); !slices.Equal(got, want) {
		t.Errorf("platform ids %q, want %q", got, want)
	}
	if e.HasCustomer() {
		t.Error("an engine built without customer sources has a customer layer")
	}
}

// TestCorpusCoverage keeps the parity corpus honest: every action, every
// way of deciding, erroring policies, load errors and every mode effect
// appear, and there are at least 100 cases.
func TestCorpusCoverage(t *testing.T) {
	actions, by, modes := map[string]bool{}, map[By]bool{}, map[Effect]bool{}
	cases, withErrors, loadErrors := 0, 0, 0
	for _, path := range fixtureFiles(t) {
		f := readFixture(t, path)
		if f.LoadError != nil {
			loadErrors++
			cases++
		}
		for _, r := range f.Requests {
			cases++
			actions[r.Action] = true
			by[r.Expect.By] = true
			modes[r.Expect.Mode] = true
			if len(r.Expect.Errors) > 0 {
				withErrors++
			}
		}
	}
	for _, a := range Actions() {
		if !actions[a] {
			t.Errorf("no case for action %s", a)
		}
	}
	for _, b := range []By{ByRequest, ByPlatform, ByCustomer, ByBoth} {
		if !by[b] {
			t.Errorf("no case decided by %s", b)
		}
	}
	for _, m := range []Effect{Allow, Ask, Deny} {
		if !modes[m] {
			t.Errorf("no case with mode %s", m)
		}
	}
	if withErrors == 0 || loadErrors == 0 {
		t.Errorf("%d cases with erroring policies, %d load errors: want some of each", withErrors, loadErrors)
	}
	if cases < 100 {
		t.Errorf("%d cases, want at least 100", cases)
	}
}

// TestDecisionCBOR: a decision encodes in canonical CBOR under the keys the
// journal documents, decodes to itself, and two engines whose files are in
// different orders produce identical bytes.
func TestDecisionCBOR(t *testing.T) {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	f := readFixture(t, filepath.Join(parityDir, "08-customer-error-denies.json"))
	cust := sources(t, parityDir, f.Customer)
	a, err := NewEngine(Platform(), cust)
	if err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(cust)
	slices.Reverse(rev)
	b, err := NewEngine(Platform(), rev)
	if err != nil {
		t.Fatal(err)
	}
	req := f.request(t, f.Requests[5]) // both customer policies error
	d := a.Decide(req)
	if len(d.Errors) != 2 {
		t.Fatalf("want two errors, got %+v", d)
	}
	x, err := em.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	y, err := em.Marshal(b.Decide(req))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("same decision, different bytes:\n%x\n%x", x, y)
	}
	var keys map[string]cbor.RawMessage
	if err := cbor.Unmarshal(x, &keys); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"allowed", "by", "errors"}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q (empty determining is omitted)", got, want)
	}
	var back Decision
	if err := cbor.Unmarshal(x, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip: %+v, want %+v", back, d)
	}
}

// TestDecideConcurrent: one engine serves many goroutines (run with -race)
// and answers each as it answers alone.
func TestDecideConcurrent(t *testing.T) {
	f := readFixture(t, filepath.Join(parityDir, "10-customer-every-op.json"))
	e, err := NewEngine(Platform(), sources(t, parityDir, f.Customer))
	if err != nil {
		t.Fatal(err)
	}
	var reqs []Request
	var want []Decision
	for _, r := range f.Requests {
		req := f.request(t, r)
		reqs = append(reqs, req)
		want = append(want, e.Decide(req))
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 50 {
				i := (g + n) % len(reqs)
				if got := e.Decide(reqs[i]); !reflect.DeepEqual(got, want[i]) {
					errs <- f.Requests[i].Description
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for d := range errs {
		t.Errorf("concurrent decision differs: %s", d)
	}
}

func TestNewEngineErrors(t *testing.T) {
	if _, err := NewEngine(nil, nil); !errors.Is(err, ErrNoPlatform) {
		t.Errorf("no platform sources: %v, want ErrNoPlatform", err)
	}
	if _, err := NewEngine([]Source{{Name: "empty.cedar", Text: []byte("// nothing\n")}}, nil); !errors.Is(err, ErrNoPlatform) {
		t.Errorf("a platform file without policies: %v, want ErrNoPlatform", err)
	}
	_, err := NewEngine(Platform(), []Source{{Name: "x.cedar", Text: []byte("\n\n  forbid (principal, action == Action::\"kv.get\", resource) when { context.kye == \"a\" };\n")}})
	var le *LoadError
	if !errors.As(err, &le) || le.Set != SetCustomer || len(le.Problems) != 1 {
		t.Fatalf("want one customer problem, got %v", err)
	}
	p := le.Problems[0]
	if p.File != "x.cedar" || p.Line != 3 || p.Column != 3 || p.Policy != "x.cedar#0" {
		t.Errorf("problem %+v: want x.cedar line 3 column 3 policy x.cedar#0", p)
	}
	if s := p.String(); !strings.HasPrefix(s, `x.cedar:3:3: policy "x.cedar#0": `) || !strings.Contains(s, "kye") {
		t.Errorf("problem reads %q", s)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"b.cedar":           "permit (principal, action, resource);\n",
		"team/a.cedar":      "forbid (principal, action == Action::\"kv.put\", resource);\n",
		"README.md":         "not a policy",
		"team/notes.cedar~": "not a policy either",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srcs, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range srcs {
		names = append(names, s.Name)
	}
	if want := []string{"b.cedar", "team/a.cedar"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	one, err := LoadDir(filepath.Join(dir, "team", "a.cedar"))
	if err != nil || len(one) != 1 || one[0].Name != "a.cedar" {
		t.Errorf("a single file: %+v, %v", one, err)
	}
	if _, err := LoadDir(t.TempDir()); !errors.Is(err, ErrNoPolicies) {
		t.Errorf("an empty directory: %v, want ErrNoPolicies", err)
	}
	e, err := NewEngine(Platform(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.customer.IDs(), []string{"b.cedar#0", "team/a.cedar#0"}; !slices.Equal(got, want) {
		t.Errorf("ids %q, want %q", got, want)
	}
}

// TestHash: the hash follows the policies' meaning, not their layout.
func TestHash(t *testing.T) {
	mk := func(customer string) [32]byte {
		var srcs []Source
		if customer != "" {
			srcs = []Source{{Name: "c.cedar", Text: []byte(customer)}}
		}
		e, err := NewEngine(Platform(), srcs)
		if err != nil {
			t.Fatal(err)
		}
		return e.Hash()
	}
	none := mk("")
	a := mk("permit (principal, action, resource);")
	spaced := mk("// a comment\npermit(\n  principal,\n  action,\n  resource\n);\n")
	forbid := mk("forbid (principal, action, resource);")
	if a != spaced {
		t.Error("comments and layout changed the hash")
	}
	if a == forbid || a == none || forbid == none {
		t.Error("different policies, same hash")
	}
}

func TestParseRequest(t *testing.T) {
	good := `{"principal": {"type": "Run", "id": "r1"}, "action": "run.log", "resource": {"type": "Run", "id": "r1"},
	  "context": {"mode": "interactive", "spent": {"calls": 0, "tokens": 0, "micros": 0}, "clearance": 0, "time": 0},
	  "entities": [{"uid": {"type": "Run", "id": "r1"}, "attrs": {"id": "r1"}, "parents": []}]}`
	r, err := ParseRequest([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(Platform(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := e.Decide(r); !d.Allowed {
		t.Errorf("a well-formed run.log request: %s", d.Explain())
	}
	for _, bad := range []string{
		`{"principal": {"type": "Run", "id": "r1"}, "action": "run.log", "resource": {"type": "Run", "id": "r1"}, "extra": 1}`,
		`{"action": "run.log", "resource": {"type": "Run", "id": "r1"}}`,
		`{"principal": "Run::r1", "action": "run.log", "resource": {"type": "Run", "id": "r1"}}`,
		`{"principal": {"type": "Run", "id": "r1"}, "action": "run.log", "resource": {"type": "Run", "id": "r1"}, "entities": [{"uid": {"type": "Run", "id": "r1"}}]}`,
	} {
		if _, err := ParseRequest([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestExplain: the text a person reads names the deciding set, the
// determining policies and the errors.
func TestExplain(t *testing.T) {
	d := Decision{By: ByCustomer, Errors: []PolicyError{{Policy: "customer:g", Message: "integer overflow"}}}
	want := "denied by the customer policies\n  because a policy failed to evaluate, which denies\n  error: customer:g: integer overflow\n"
	if got := d.Explain(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	d = Decision{By: ByCustomer}
	if got := d.Explain(); !strings.Contains(got, "default deny") {
		t.Errorf("a default deny reads %q", got)
	}
}
