package host

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/policy"
	"github.com/cedar-policy/cedar-go/types"
)

// The policy layer's view of a call, per policy/schema.cedarschema: the
// principal is the Run (in its Agent and its Cell), the resource is what
// the call touches, the context the facts of the call.

// Entity types of the policy schema that the host makes; the resources'
// (Host, Namespace, Tool) are named by their capabilities (caps.Facts).
const (
	entRun   types.EntityType = "Run"
	entAgent types.EntityType = "Agent"
	entCell  types.EntityType = "Cell"
)

// callFacts are what the policy sees of one call besides the session's
// constants: the resource and the op's own context attributes.
type callFacts struct {
	resource types.EntityUID // zero: the run itself
	ip       string          // a Host named by an IP address
	explicit bool            // ... that the run's grant names itself
	attrs    []fact          // the op's context attributes, in schema order
	method   string          // the HTTP method, for the permission modes
}

// fact is one context attribute of a call (caps.Fact).
type fact = caps.Fact

// facts asks the call's capability what the policy needs of c, which the
// capability layer has checked (so its request decodes).
func (s *session) facts(c *Call) (callFacts, error) {
	var f callFacts
	inst := s.inst[s.ci]
	if inst == nil {
		return f, fmt.Errorf("no policy resource for op %s", c.Op.Name)
	}
	cf, err := inst.Facts(c)
	if err != nil {
		return f, err
	}
	if cf.ResourceType != "" {
		f.resource = types.NewEntityUID(types.EntityType(cf.ResourceType), types.String(cf.ResourceID))
	}
	f.ip, f.explicit, f.attrs, f.method = cf.IP, cf.Explicit, cf.Attrs, cf.Method
	return f, nil
}

// cacheKey returns the key under which the session keeps the policy's
// decision on a call with these facts: everything the decision can depend
// on but the session's constants (principal, entities, mode, clearance),
// and the call's time and spending when no policy mentions them.
func (s *session) cacheKey(c *Call, f *callFacts) string {
	var b strings.Builder
	b.WriteString(c.Op.Name)
	b.WriteByte(0)
	b.WriteString(string(f.resource.Type))
	b.WriteByte(0)
	b.WriteString(string(f.resource.ID))
	b.WriteByte(0)
	b.WriteString(f.ip)
	// explicit has a place of its own after an address: the same address
	// decides differently when the grant names it. (No address, no flag:
	// other calls' keys stay as they were.)
	if f.ip != "" {
		if f.explicit {
			b.WriteString("\x001")
		} else {
			b.WriteString("\x000")
		}
	}
	// The method, which the permission modes read (the record of an
	// allowed call names the mode's rule).
	b.WriteByte(0)
	b.WriteString(f.method)
	// An attribute no policy names cannot change a decision (a Cedar
	// policy reads a context attribute by its name: context.key,
	// context["key"], context has key), so it is left out: kv.put calls
	// of different keys share one decision unless a policy reads the key.
	for _, a := range f.attrs {
		if !s.deps.Policy.Mentions(a.Name) {
			continue
		}
		b.WriteByte(0)
		b.WriteString(a.Name)
		b.WriteByte('=')
		switch a.Kind {
		case caps.FactString:
			b.WriteString(a.Str)
		case caps.FactNumber:
			b.WriteString(strconv.FormatInt(a.Num, 10))
		case caps.FactSet:
			for _, v := range a.Set {
				b.WriteString(strconv.Quote(v))
			}
		}
	}
	if s.policyUses.time {
		fmt.Fprintf(&b, "\x00t%d", s.deps.Now().Unix())
	}
	if s.policyUses.spent {
		fmt.Fprintf(&b, "\x00s%d", c.Step-1)
	}
	return b.String()
}

// policyRequest builds the policy request of a call from its facts.
func (s *session) policyRequest(c *Call, f *callFacts) policy.Request {
	ctx := types.RecordMap{
		"mode":      types.String(s.policyMode()),
		"spent":     types.NewRecord(types.RecordMap{"calls": types.Long(c.Step - 1), "tokens": types.Long(0), "micros": types.Long(0)}),
		"clearance": types.Long(s.deps.Clearance),
		"time":      types.Long(s.deps.Now().Unix()),
	}
	for _, a := range f.attrs {
		switch a.Kind {
		case caps.FactString:
			ctx[types.String(a.Name)] = types.String(a.Str)
		case caps.FactNumber:
			ctx[types.String(a.Name)] = types.Long(a.Num)
		case caps.FactSet:
			vs := make([]types.Value, len(a.Set))
			for i, v := range a.Set {
				vs[i] = types.String(v)
			}
			ctx[types.String(a.Name)] = types.NewSet(vs...)
		}
	}
	resource, ents := s.runUID, s.entities
	if f.resource != (types.EntityUID{}) {
		resource = f.resource
		attrs := types.RecordMap{"name": types.String(f.resource.ID)}
		if f.ip != "" {
			if a, err := types.ParseIPAddr(f.ip); err == nil {
				attrs["ip"] = a
			}
			if f.explicit {
				attrs["explicit"] = types.True
			}
		}
		// The session's entities, plus the resource: a copy, since a
		// decision must not see another call's resource.
		ents = make(types.EntityMap, len(s.entities)+1)
		for k, v := range s.entities {
			ents[k] = v
		}
		ents[resource] = types.Entity{UID: resource, Attributes: types.NewRecord(attrs)}
	}
	return policy.Request{Principal: s.runUID, Action: c.Op.Name, Resource: resource, Context: types.NewRecord(ctx), Entities: ents}
}

// policyMode is the mode the policy context names: "interactive" when
// someone can answer the permission modes' asks, "unattended" otherwise.
func (s *session) policyMode() string {
	if s.deps.Approver != nil {
		return "interactive"
	}
	return "unattended"
}

// initPolicy builds the entities every policy request of the session
// carries (the run, its agent and its cell) and notes which varying
// context attributes the policies mention.
func (s *session) initPolicy() {
	cell := hex.EncodeToString(s.deps.Key.Public().(ed25519.PublicKey)[:8])
	agent := s.header.ModuleName
	if agent == "" {
		agent = "agent"
	}
	s.runUID = types.NewEntityUID(entRun, types.String(s.run.String()))
	agentUID := types.NewEntityUID(entAgent, types.String(agent))
	cellUID := types.NewEntityUID(entCell, types.String(cell))
	s.entities = types.EntityMap{
		s.runUID: {UID: s.runUID, Parents: types.NewEntityUIDSet(agentUID, cellUID),
			Attributes: types.NewRecord(types.RecordMap{"id": types.String(s.run.String())})},
		agentUID: {UID: agentUID, Attributes: types.NewRecord(types.RecordMap{"name": types.String(agent),
			"module_sha256": types.String(hex.EncodeToString(s.header.ModuleSHA256))})},
		cellUID: {UID: cellUID, Attributes: types.NewRecord(types.RecordMap{"name": types.String(cell),
			"clearance": types.Long(s.deps.Clearance)})},
	}
	s.decisions = map[string]*cachedDecision{}
	if s.deps.Policy != nil {
		s.policyUses.time = s.deps.Policy.Mentions("time")
		s.policyUses.spent = s.deps.Policy.Mentions("spent")
	}
}

// maxCachedDecisions bounds a session's cache of policy decisions; it
// starts over when full.
const maxCachedDecisions = 4096

// cachedDecision is a policy decision the session keeps, with the encoded
// gate record of the call when it went through.
type cachedDecision struct {
	dec     policy.Decision
	allowed []byte
}

// decide returns the policy's decision on c with facts f, from the
// session's cache when the same call was decided before.
func (s *session) decide(c *Call, f *callFacts) *cachedDecision {
	key := s.cacheKey(c, f)
	if d, ok := s.decisions[key]; ok {
		return d
	}
	d := &cachedDecision{dec: s.deps.Policy.Decide(s.policyRequest(c, f))}
	if len(s.decisions) >= maxCachedDecisions {
		clear(s.decisions)
	}
	s.decisions[key] = d
	return d
}
