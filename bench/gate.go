package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/journal/badgerstore"
	"github.com/agentrt/agentrt/policy"
)

// benchCustomer is a customer policy set of the size a team writes: a
// permit of what the token grants, and a few forbids with conditions.
var benchCustomer = []policy.Source{{Name: "team.cedar", Text: []byte(`
@id("team.allow") permit (principal, action, resource);
@id("team.no-deletes") forbid (principal, action == Action::"kv.delete", resource);
@id("team.no-post") forbid (principal, action == Action::"http.request", resource) when { context.method == "POST" };
@id("team.business-hours") forbid (principal, action in Action::"effect", resource) when { context.time < 0 };
`)}}

// benchModes ask before HTTP and allow the rest.
const benchModes = "rules:\n  - {name: ask-http, op: http.request, effect: ask}\n  - {name: auto-kv, op: 'kv.*', effect: allow}\n"

// Figure 8: the gate's cost per call.
func (h *harness) gate(ctx context.Context) ([]Figure, error) {
	n := h.cfg.PureCalls
	platform, err := policy.NewEngine(policy.Platform(), nil)
	if err != nil {
		return nil, err
	}
	both, err := policy.NewEngine(policy.Platform(), benchCustomer)
	if err != nil {
		return nil, err
	}
	modes, err := policy.ParseModes([]byte(benchModes))
	if err != nil {
		return nil, err
	}
	per := func(name string, deps host.Deps) ([]float64, error) {
		var out []float64
		for r := range h.cfg.Reps {
			st, err := badgerstore.Open(dir(h.root, fmt.Sprintf("gate-%s-%d", name, r)))
			if err != nil {
				return nil, err
			}
			_, key, _ := ed25519.GenerateKey(nil)
			d := deps
			d.Store, d.KV, d.Events, d.Key = st, st, st, key
			hst, err := host.New(h.engine, d, host.Config{})
			if err == nil {
				start := time.Now()
				_, err = hst.Run(ctx, host.RunSpec{Code: h.guests.Loop, Name: "bench", Input: countInput(n), Grant: host.DefaultGrant()})
				out = append(out, float64(time.Since(start).Nanoseconds())/float64(n+1))
			}
			st.Close()
			if err != nil {
				return nil, err
			}
			h.logf("8 gate %s rep %d: %.0f ns/call", name, r, out[len(out)-1])
		}
		return out, nil
	}
	bare, err := per("none", host.Deps{})
	if err != nil {
		return nil, err
	}
	withPlatform, err := per("platform", host.Deps{Policy: platform})
	if err != nil {
		return nil, err
	}
	withAll, err := per("customer+modes", host.Deps{Policy: both, Modes: modes})
	if err != nil {
		return nil, err
	}
	verify, floor, err := h.tokenVerify()
	if err != nil {
		return nil, err
	}
	decide, err := h.decideUncached(both)
	if err != nil {
		return nil, err
	}
	loop := fmt.Sprintf("host.Host.Run of testdata/loop.wat making %d+1 run.input calls, journaled (as figure 2), wall time / calls", n)
	noGate := &Floor{Name: "no policy layer", Unit: "ns/call", Value: median(bare), Samples: bare,
		Measures: "the same run on a host without a policy or modes: the capability layer alone (the grant, from the run's verified token)."}
	return []Figure{
		{ID: "8a", Name: "gate: capability + platform policy, per call", Unit: "ns/call", Better: "lower", Value: median(withPlatform), Samples: withPlatform,
			Measures: loop + ", the host running the platform policy set (policy.Platform(): 6 policies) on every call: the gate's record of the decision journaled with each call. The calls are alike, so after the first the decision comes from the run's cache of decisions (keyed by op, resource and the op's context attributes, plus the time and the calls spent when a policy mentions them); 8d is the cost of a decision not cached.",
			Floor:    noGate},
		{ID: "8b", Name: "gate: + customer policies and permission modes, per call", Unit: "ns/call", Better: "lower", Value: median(withAll), Samples: withAll,
			Measures: loop + ", with a customer set of 4 policies (a permit and 3 forbids with conditions, one on context.time, so the cache key holds the second) beside the platform set, and permission modes of 2 rules applied after the decision (run.input matches neither: the default, allow).",
			Floor:    noGate},
		{ID: "8c", Name: "token verification at a run's start, 2-link chain", Unit: "us", Better: "lower", Value: median(verify), Samples: verify,
			Measures: "capability.Verify of a root link and one attenuation, sealed (the run's token as agentrt run presents it): decode, canonical re-encoding checks, two link signatures and the seal, narrowing, window and audience; done once per run, not per call (each call checks the verified grant).",
			Floor: &Floor{Name: "three ed25519 verifications", Unit: "us", Value: median(floor), Samples: floor,
				Measures: "ed25519.Verify of a 300-byte message, three times: the signatures alone."}},
		{ID: "8d", Name: "policy decision not cached, platform + customer sets", Unit: "ns", Better: "lower", Value: median(decide), Samples: decide,
			Measures: "policy.Engine.Decide of an http.request (a Host resource, method, scheme, port and path in the context, the run, agent and cell entities) against the 6 platform and 4 customer policies, each request with another path: schema checks of the request, both Cedar sets evaluated. What a call unlike any before it in the run costs on top of 8b."},
	}, nil
}

// decideUncached times policy decisions of distinct http requests.
func (h *harness) decideUncached(e *policy.Engine) ([]float64, error) {
	reqs := make([]policy.Request, 1000)
	for i := range reqs {
		r, err := policy.ParseRequest(fmt.Appendf(nil, `{
  "principal": {"type": "Run", "id": "r1"}, "action": "http.request", "resource": {"type": "Host", "id": "api.example.com"},
  "context": {"mode": "unattended", "spent": {"calls": %d, "tokens": 0, "micros": 0}, "clearance": 1, "time": 1767225600,
              "method": "GET", "scheme": "https", "port": 443, "path": "/items/%d"},
  "entities": [
    {"uid": {"type": "Run", "id": "r1"}, "attrs": {"id": "r1"}, "parents": [{"type": "Agent", "id": "a"}, {"type": "Cell", "id": "c"}]},
    {"uid": {"type": "Agent", "id": "a"}, "attrs": {"name": "a", "module_sha256": "00"}, "parents": []},
    {"uid": {"type": "Cell", "id": "c"}, "attrs": {"name": "c", "clearance": 1}, "parents": []},
    {"uid": {"type": "Host", "id": "api.example.com"}, "attrs": {"name": "api.example.com"}, "parents": []}]}`, i, i))
		if err != nil {
			return nil, err
		}
		reqs[i] = r
	}
	var out []float64
	for range h.cfg.Reps {
		start := time.Now()
		for k := range 10 * len(reqs) {
			if d := e.Decide(reqs[k%len(reqs)]); !d.Allowed {
				return nil, fmt.Errorf("bench: the policy denied: %s", d.Explain())
			}
		}
		out = append(out, float64(time.Since(start).Nanoseconds())/float64(10*len(reqs)))
	}
	return out, nil
}

// tokenVerify times capability.Verify of a sealed 2-link token and, as its
// floor, three bare ed25519 verifications.
func (h *harness) tokenVerify() (verify, floor []float64, err error) {
	_, root, _ := ed25519.GenerateKey(nil)
	_, holder, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	caps := capability.Caps{Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"a", "b"}},
		HTTP: &capability.HTTP{Hosts: []string{"api.example.com", "example.org:443"}}}
	tok, err := capability.Issue(root, capability.Claims{Subject: holder.Public().(ed25519.PublicKey), Caps: caps,
		NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour)})
	if err != nil {
		return nil, nil, err
	}
	caps.KV.Namespaces = []string{"a"}
	if tok, err = capability.Attenuate(tok, holder, capability.Claims{Caps: caps}); err != nil {
		return nil, nil, err
	}
	// Sealed by the child's key, as agentrt run presents it.
	if tok, err = capability.Seal(tok, nil); err != nil {
		return nil, nil, err
	}
	roots := []ed25519.PublicKey{root.Public().(ed25519.PublicKey)}
	msg := make([]byte, 300)
	sig := ed25519.Sign(root, msg)
	const k = 2000
	for range h.cfg.Reps {
		start := time.Now()
		for range k {
			if _, err := capability.Verify(tok, roots, capability.Options{Now: now, IgnoreAudience: true}); err != nil {
				return nil, nil, err
			}
		}
		verify = append(verify, us(time.Since(start))/k)
		start = time.Now()
		for range k {
			ed25519.Verify(roots[0], msg, sig)
			ed25519.Verify(roots[0], msg, sig)
			ed25519.Verify(roots[0], msg, sig)
		}
		floor = append(floor, us(time.Since(start))/k)
	}
	return verify, floor, nil
}
