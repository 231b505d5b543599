// Package kv is the kv capability (agentrt:kv): durable key/value state in
// the grant's namespace, shared by the agents that name the same one.
//
//	kv.get    (abi.KVGetRequest) -> abi.KVGetResponse        pure; StatusNotFound if absent
//	kv.put    (abi.KVPutRequest) -> ()                       effect, idempotent
//	kv.delete (abi.KVDeleteRequest) -> abi.KVDeleteResponse  effect, idempotent
//	kv.list   (abi.KVListRequest) -> abi.KVListResponse      pure
//
// Reads are journaled with their results, so replay sees the state the run
// saw even if another run changed it since. Writes are staged
// (Handler.Stage) and committed in one atomic batch with their intent,
// executing and completed entries: exactly once, never in doubt.
//
// Errors: StatusBadRequest for a malformed request or an empty or oversized
// key (a write's is refused at the gate, before its intent), StatusTooLarge
// for a list limit over 10 000, StatusFailed when the store fails.
//
// The grant section is kv: {namespace: NAME}; the policy sees the resource
// Namespace::NAME and the context attribute key (prefix for kv.list). It
// needs the cell's store (Deps.Store).
package kv

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
	"github.com/fxamacker/cbor/v2"
)

// Store reads the agents' durable key/value state, per namespace. Writes
// reach it through the journal (journal.KVWrite), committed atomically with
// the entries that record them.
type Store interface {
	KVGet(ns, key string) ([]byte, bool, error)
	KVList(ns, prefix, after string, limit int) ([]string, bool, error)
}

// Limits of the kv capability.
const (
	MaxKey       = 1024
	DefaultLimit = 1000
	MaxLimit     = 10000
)

// Grant allows durable key/value state in one namespace.
type Grant struct {
	// Namespace scopes the keys; agents sharing a namespace share state.
	Namespace string `yaml:"namespace" cbor:"namespace"`
}

// Check requires a namespace.
func (g *Grant) Check() error {
	if g.Namespace == "" || strings.ContainsRune(g.Namespace, 0) || !utf8.ValidString(g.Namespace) {
		return fmt.Errorf("kv: a non-empty UTF-8 namespace without NUL is required (kv: {namespace: NAME})")
	}
	return nil
}

// Token sets the kv capability of a token: the one namespace.
func (g *Grant) Token(c *capability.Caps) error {
	c.KV = &capability.KV{Namespaces: []string{g.Namespace}}
	return nil
}

// CheckToken has nothing beyond Within to check.
func (*Grant) CheckToken(capability.Caps) error { return nil }

// Deps is what the capability needs from its cell.
type Deps struct {
	Store Store
}

// Capability is the kv capability, as the host registers it.
type Capability struct{}

// Cap names the capability.
func (Capability) Cap() abi.Capability { return abi.CapKV }

// FromToken grants the token's namespace, which must be one.
func (Capability) FromToken(c capability.Caps) (*Grant, error) {
	if c.KV == nil {
		return nil, nil
	}
	if len(c.KV.Namespaces) != 1 {
		return nil, fmt.Errorf("the token allows kv namespaces %q: a run uses one (attenuate the token to one, or pass a grant file naming it)", c.KV.Namespaces)
	}
	return &Grant{Namespace: c.KV.Namespaces[0]}, nil
}

// Open returns the run's view of its namespace.
func (Capability) Open(g *Grant, d Deps, _ *caps.Run) (caps.Instance, error) {
	if d.Store == nil {
		return nil, fmt.Errorf("kv: the cell has no store")
	}
	return &instance{ns: g.Namespace, store: d.Store}, nil
}

type instance struct {
	ns    string
	store Store
}

func (in *instance) Handler(op abi.Op) caps.Handler {
	switch op.Code {
	case abi.OpKVGet:
		return caps.Handler{Serve: in.get}
	case abi.OpKVPut:
		return caps.Handler{Check: checkRequest(func(r *abi.KVPutRequest) string { return r.Key }), Stage: in.put}
	case abi.OpKVDelete:
		return caps.Handler{Check: checkRequest(func(r *abi.KVDeleteRequest) string { return r.Key }), Stage: in.delete}
	case abi.OpKVList:
		return caps.Handler{Serve: in.list}
	}
	return caps.Handler{}
}

func (in *instance) get(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.KVGetRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	if d := checkKey(r.Key); d != nil {
		return d.Status, d.Body
	}
	v, ok, err := in.store.KVGet(in.ns, r.Key)
	switch {
	case err != nil:
		return caps.Error(abi.StatusFailed, "kv.get: %v", err)
	case !ok:
		return caps.Error(abi.StatusNotFound, "kv.get: no key %q", r.Key)
	}
	return caps.OK(&abi.KVGetResponse{Value: v})
}

func (in *instance) put(c *caps.Call) (abi.Status, []byte, journal.KVWrite) {
	var r abi.KVPutRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	if r.Value == nil {
		r.Value = []byte{}
	}
	return abi.StatusOK, nil, journal.KVWrite{Namespace: in.ns, Key: r.Key, Value: r.Value}
}

func (in *instance) delete(c *caps.Call) (abi.Status, []byte, journal.KVWrite) {
	var r abi.KVDeleteRequest
	_ = abi.Unmarshal(c.Request, &r) // checked by the gate
	_, existed, err := in.store.KVGet(in.ns, r.Key)
	if err != nil {
		st, b := caps.Error(abi.StatusFailed, "kv.delete: %v", err)
		return st, b, journal.KVWrite{}
	}
	st, b := caps.OK(&abi.KVDeleteResponse{Existed: existed})
	return st, b, journal.KVWrite{Namespace: in.ns, Key: r.Key, Delete: true}
}

func (in *instance) list(_ context.Context, c *caps.Call) (abi.Status, []byte) {
	var r abi.KVListRequest
	if st, b, ok := caps.Decode(c, &r); !ok {
		return st, b
	}
	limit := int(r.Limit)
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		return caps.Error(abi.StatusTooLarge, "kv.list: limit %d exceeds %d", limit, MaxLimit)
	}
	keys, more, err := in.store.KVList(in.ns, r.Prefix, r.After, limit)
	if err != nil {
		return caps.Error(abi.StatusFailed, "kv.list: %v", err)
	}
	if keys == nil {
		keys = []string{}
	}
	return caps.OK(&abi.KVListResponse{Keys: keys, More: more})
}

func checkKey(key string) *caps.Denial {
	if key == "" || len(key) > MaxKey {
		return caps.Deny(abi.StatusBadRequest, "kv: key must be 1..%d bytes, got %d", MaxKey, len(key))
	}
	return nil
}

// checkRequest is the gate stage of a kv write: the request must decode
// and name a valid key before its intent is journaled.
func checkRequest[T any](key func(*T) string) func(*caps.Call) *caps.Denial {
	return func(c *caps.Call) *caps.Denial {
		var r T
		if d := caps.DecodeCheck(c, &r); d != nil {
			return d
		}
		return checkKey(key(&r))
	}
}

// Facts gives the policy the namespace, and the key (the prefix of a
// list).
func (in *instance) Facts(c *caps.Call) (caps.Facts, error) {
	f := caps.Facts{ResourceType: "Namespace", ResourceID: in.ns}
	if c.Op.Code == abi.OpKVList {
		var r abi.KVListRequest
		if err := abi.Unmarshal(c.Request, &r); err != nil {
			return f, err
		}
		f.Attrs = []caps.Fact{{Name: "prefix", Str: r.Prefix, Kind: caps.FactString}}
		return f, nil
	}
	// Read loosely, for the key alone: the capability layer has checked
	// the request strictly.
	var r struct {
		Key string `cbor:"key"`
	}
	if err := cbor.Unmarshal(c.Request, &r); err != nil {
		return f, err
	}
	f.Attrs = []caps.Fact{{Name: "key", Str: r.Key, Kind: caps.FactString}}
	return f, nil
}

// Idempotent: kv writes never are in doubt (they commit with their
// entries), and their ops are idempotent in the ABI.
func (*instance) Idempotent(*caps.Call) bool { return false }
func (*instance) Close()                     {}
