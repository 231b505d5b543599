package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
)

// Set names, as they qualify policy ids in a Decision.
const (
	SetPlatform = "platform"
	SetCustomer = "customer"
)

// Request is one call to decide: who (Principal) does what (Action, an op
// name such as "kv.get") to what (Resource), with the facts of the call
// (Context) and the entities the policies may look at. Principal and
// Resource must be among Entities; action entities come from the schema and
// must not be.
type Request struct {
	Principal types.EntityUID
	Action    string
	Resource  types.EntityUID
	Context   types.Record
	Entities  types.EntityMap
}

// By says which part of the decision decided it.
type By string

const (
	// ByRequest: the request itself was malformed or named something
	// unknown; no policy was evaluated. Always a denial.
	ByRequest By = "request"
	// ByPlatform: the platform set denied, or allowed and there is no
	// customer set.
	ByPlatform By = "platform"
	// ByCustomer: the platform set allowed and the customer set denied.
	ByCustomer By = "customer"
	// ByBoth: both sets allowed.
	ByBoth By = "both"
)

// PolicyError is a policy that failed to evaluate, and why.
type PolicyError struct {
	Policy  string `cbor:"policy" json:"policy"`
	Message string `cbor:"msg" json:"message"`
}

// Decision is the outcome of Decide, in the form the journal records with a
// call's intent. Slices are sorted, so equal decisions encode to equal
// bytes.
type Decision struct {
	Allowed bool `cbor:"allowed" json:"allowed"`
	By      By   `cbor:"by" json:"by"`
	// Determining are the qualified ids ("platform:ID", "customer:ID") of
	// the policies that decided: the matching forbids of the set that
	// denied, or the matching permits of every set when allowed. Empty on
	// a default deny (nothing permits) and on a denial ByRequest.
	Determining []string `cbor:"determining,omitempty" json:"determining,omitempty"`
	// Errors are the policies of either set that failed to evaluate. Any
	// error denies.
	Errors []PolicyError `cbor:"errors,omitempty" json:"errors,omitempty"`
	// Reason says what was wrong with the request, for denials ByRequest.
	Reason string `cbor:"reason,omitempty" json:"reason,omitempty"`
}

// ErrorIDs returns the qualified ids of the erroring policies, sorted.
func (d Decision) ErrorIDs() []string {
	ids := make([]string, len(d.Errors))
	for i, e := range d.Errors {
		ids[i] = e.Policy
	}
	return ids
}

// Explain renders the decision for a person, one fact a line.
func (d Decision) Explain() string {
	var b strings.Builder
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	switch d.By {
	case ByRequest:
		fmt.Fprintf(&b, "%s: the request is invalid: %s\n", verdict, d.Reason)
	case ByBoth:
		fmt.Fprintf(&b, "%s by the platform and customer policies\n", verdict)
	default:
		fmt.Fprintf(&b, "%s by the %s policies\n", verdict, d.By)
	}
	if !d.Allowed && d.By != ByRequest && len(d.Determining) == 0 {
		if len(d.Errors) > 0 {
			fmt.Fprintf(&b, "  because a policy failed to evaluate, which denies\n")
		} else {
			fmt.Fprintf(&b, "  because no %s policy permits it (default deny)\n", d.By)
		}
	}
	for _, id := range d.Determining {
		fmt.Fprintf(&b, "  determining: %s\n", id)
	}
	for _, e := range d.Errors {
		fmt.Fprintf(&b, "  error: %s: %s\n", e.Policy, e.Message)
	}
	return b.String()
}

// Engine decides requests against a platform set and an optional customer
// set. It is immutable and safe for concurrent use.
type Engine struct {
	platform *Set
	customer *Set // nil: no customer layer
	hash     [32]byte
	// mentions keeps Mentions' answers by word: the sets never change,
	// and every run's gate asks about the same few attributes.
	mentions sync.Map
}

// ErrNoPlatform is returned by NewEngine when the platform set is empty: an
// engine without platform policies would deny everything.
var ErrNoPlatform = errors.New("policy: no platform policies")

// NewEngine parses and validates both sets. platform is usually Platform();
// a nil or empty customer means the engine has no customer layer, and the
// platform set alone decides. Any problem in either set fails the whole
// engine (*LoadError): a policy is never silently left out.
func NewEngine(platform, customer []Source) (*Engine, error) {
	if len(platform) == 0 {
		return nil, ErrNoPlatform
	}
	p, err := ParseSet(SetPlatform, platform)
	if err != nil {
		return nil, err
	}
	if p.Len() == 0 {
		return nil, ErrNoPlatform
	}
	e := &Engine{platform: p}
	if len(customer) > 0 {
		if e.customer, err = ParseSet(SetCustomer, customer); err != nil {
			return nil, err
		}
	}
	e.hash = e.computeHash()
	return e, nil
}

// Mentions reports whether any policy of either set has word in its
// canonical text. A caller that leaves a context attribute out of a cache
// key of decisions asks this first: a decision can depend on an attribute
// only if some policy names it. (A word in an annotation counts too; that
// only makes the caller cache less.)
func (e *Engine) Mentions(word string) bool {
	if m, ok := e.mentions.Load(word); ok {
		return m.(bool)
	}
	m := e.mentionsIn(word)
	e.mentions.Store(word, m)
	return m
}

func (e *Engine) mentionsIn(word string) bool {
	for _, s := range []*Set{e.platform, e.customer} {
		if s == nil {
			continue
		}
		for _, t := range s.texts {
			if strings.Contains(t, word) {
				return true
			}
		}
	}
	return false
}

// HasCustomer reports whether the engine has a customer layer.
func (e *Engine) HasCustomer() bool { return e.customer != nil }

// Hash identifies the policies in force: SHA-256 over the schema and each
// set's policies (id and canonical text, in order of id), so reordered or
// duplicated files give the same hash. The run header records it.
func (e *Engine) Hash() [32]byte { return e.hash }

func (e *Engine) computeHash() [32]byte {
	h := sha256.New()
	var buf []byte
	put := func(s string) {
		buf = binary.AppendUvarint(buf[:0], uint64(len(s)))
		h.Write(buf)
		h.Write([]byte(s))
	}
	put("agentrt policy v1")
	put(string(schemaText))
	for _, s := range []*Set{e.platform, e.customer} {
		if s == nil {
			put("")
			continue
		}
		put(s.name)
		for i, id := range s.ids {
			put(string(id))
			put(s.texts[i])
		}
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// entityStore serves the request's entities and the schema's action
// entities, so `action in Action::"kv"` works without every request
// carrying the action hierarchy.
type entityStore struct{ req types.EntityMap }

func (g entityStore) Get(uid types.EntityUID) (types.Entity, bool) {
	if uid.Type == actionType {
		e, ok := theSchema.entities[uid]
		return e, ok
	}
	return g.req.Get(uid)
}

const actionType = types.EntityType("Action")

// Decide returns the decision on r. It never fails: whatever is wrong with
// the request or a policy denies, and the Decision says why.
func (e *Engine) Decide(r Request) Decision {
	action, reason := checkRequest(r)
	if reason != "" {
		return Decision{By: ByRequest, Reason: reason}
	}
	req := cedar.Request{Principal: r.Principal, Action: action, Resource: r.Resource, Context: r.Context}
	store := entityStore{req: r.Entities}

	pOK, pDet, errs := evaluate(e.platform, store, req, nil)
	if !pOK {
		return Decision{By: ByPlatform, Determining: pDet, Errors: sortErrors(errs)}
	}
	if e.customer == nil {
		return Decision{Allowed: true, By: ByPlatform, Determining: pDet, Errors: sortErrors(errs)}
	}
	cOK, cDet, errs := evaluate(e.customer, store, req, errs)
	if !cOK {
		return Decision{By: ByCustomer, Determining: cDet, Errors: sortErrors(errs)}
	}
	det := append(pDet, cDet...)
	slices.Sort(det)
	return Decision{Allowed: true, By: ByBoth, Determining: det}
}

// evaluate runs one set and says whether it allows, its determining policy
// ids and the errors (appended to errs), all qualified by the set's name.
// Cedar skips a policy that errors; here any error makes the set deny.
func evaluate(s *Set, store entityStore, req cedar.Request, errs []PolicyError) (bool, []string, []PolicyError) {
	dec, diag := cedar.Authorize(s, store, req)
	for _, de := range diag.Errors {
		errs = append(errs, PolicyError{Policy: s.name + ":" + string(de.PolicyID), Message: de.Message})
	}
	allowed := dec == cedar.Allow && len(diag.Errors) == 0
	var det []string
	// On Allow the reasons are the permits; on Deny the forbids (none on a
	// default deny). An Allow undone by an error has no determining policy:
	// the error decided.
	if allowed || dec == cedar.Deny {
		for _, r := range diag.Reasons {
			det = append(det, s.name+":"+string(r.PolicyID))
		}
		slices.Sort(det)
	}
	return allowed, det, errs
}

func sortErrors(errs []PolicyError) []PolicyError {
	slices.SortFunc(errs, func(a, b PolicyError) int { return strings.Compare(a.Policy, b.Policy) })
	return errs
}

// checkRequest returns the action's UID, or why the request cannot be
// decided.
func checkRequest(r Request) (types.EntityUID, string) {
	action, ok := theSchema.actions[r.Action]
	if !ok {
		return action, fmt.Sprintf("unknown action %q", r.Action)
	}
	if _, ok := r.Entities[r.Principal]; !ok {
		return action, fmt.Sprintf("unknown principal %s: not among the request's entities", r.Principal)
	}
	if _, ok := r.Entities[r.Resource]; !ok {
		return action, fmt.Sprintf("unknown resource %s: not among the request's entities", r.Resource)
	}
	if r.Resource.Type == hostType {
		if reason := checkHost(r); reason != "" {
			return action, reason
		}
	}
	var bad []string
	for uid, ent := range r.Entities {
		switch {
		case uid != ent.UID:
			bad = append(bad, fmt.Sprintf("entity %s is filed under %s", ent.UID, uid))
		case uid.Type == actionType:
			bad = append(bad, fmt.Sprintf("entity %s: action entities come from the schema, not the request", uid))
		default:
			if err := theSchema.validator.Entity(ent); err != nil {
				bad = append(bad, fmt.Sprintf("entity %s: %v", uid, err))
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad) // map order must not pick the reason
		return action, bad[0]
	}
	err := theSchema.validator.Request(types.Request{Principal: r.Principal, Action: action, Resource: r.Resource, Context: r.Context})
	if err != nil {
		return action, err.Error()
	}
	return action, ""
}
