package host

import (
	"context"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/journal"
)

// KVStore reads the agents' durable key/value state, per namespace. Writes
// reach it through the journal (journal.KVWrite), committed atomically with
// the entries that record them.
type KVStore interface {
	KVGet(ns, key string) ([]byte, bool, error)
	KVList(ns, prefix, after string, limit int) ([]string, bool, error)
}

// Limits of the kv capability.
const (
	maxKVKey       = 1024
	defaultKVLimit = 1000
	maxKVLimit     = 10000
)

// The kv capability: durable state in the grant's namespace.
//
//	kv.get    (KVGetRequest) -> KVGetResponse        pure; StatusNotFound if absent
//	kv.put    (KVPutRequest) -> ()                   effect, idempotent
//	kv.delete (KVDeleteRequest) -> KVDeleteResponse  effect, idempotent
//	kv.list   (KVListRequest) -> KVListResponse      pure
//
// Reads are journaled with their results, so replay sees the state the run
// saw even if another run changed it since. Writes are staged and committed
// in one atomic batch with their intent, executing and completed entries:
// exactly once, never in doubt. Errors: StatusBadRequest for a
// malformed request or an empty or oversized key, StatusFailed when the
// store fails.
func init() {
	register("kv.get", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		var r abi.KVGetRequest
		if st, b, ok := decodeRequest(c, &r); !ok {
			return st, b
		}
		if st, b, ok := checkKey(r.Key); !ok {
			return st, b
		}
		v, ok, err := s.deps.KV.KVGet(s.grant.KV.Namespace, r.Key)
		switch {
		case err != nil:
			return errorResponse(abi.StatusFailed, "kv.get: %v", err)
		case !ok:
			return errorResponse(abi.StatusNotFound, "kv.get: no key %q", r.Key)
		}
		return okResponse(&abi.KVGetResponse{Value: v})
	}})
	register("kv.put", handler{check: checkKVRequest[abi.KVPutRequest](func(r *abi.KVPutRequest) string { return r.Key }),
		stage: func(s *session, c *Call) (abi.Status, []byte, journal.KVWrite) {
			var r abi.KVPutRequest
			_ = abi.Unmarshal(c.Request, &r) // checked by the gate
			if r.Value == nil {
				r.Value = []byte{}
			}
			return abi.StatusOK, nil, journal.KVWrite{Namespace: s.grant.KV.Namespace, Key: r.Key, Value: r.Value}
		}})
	register("kv.delete", handler{check: checkKVRequest[abi.KVDeleteRequest](func(r *abi.KVDeleteRequest) string { return r.Key }),
		stage: func(s *session, c *Call) (abi.Status, []byte, journal.KVWrite) {
			var r abi.KVDeleteRequest
			_ = abi.Unmarshal(c.Request, &r) // checked by the gate
			_, existed, err := s.deps.KV.KVGet(s.grant.KV.Namespace, r.Key)
			if err != nil {
				st, b := errorResponse(abi.StatusFailed, "kv.delete: %v", err)
				return st, b, journal.KVWrite{}
			}
			st, b := okResponse(&abi.KVDeleteResponse{Existed: existed})
			return st, b, journal.KVWrite{Namespace: s.grant.KV.Namespace, Key: r.Key, Delete: true}
		}})
	register("kv.list", handler{serve: func(_ context.Context, s *session, c *Call) (abi.Status, []byte) {
		var r abi.KVListRequest
		if st, b, ok := decodeRequest(c, &r); !ok {
			return st, b
		}
		limit := int(r.Limit)
		if limit == 0 {
			limit = defaultKVLimit
		}
		if limit > maxKVLimit {
			return errorResponse(abi.StatusTooLarge, "kv.list: limit %d exceeds %d", limit, maxKVLimit)
		}
		keys, more, err := s.deps.KV.KVList(s.grant.KV.Namespace, r.Prefix, r.After, limit)
		if err != nil {
			return errorResponse(abi.StatusFailed, "kv.list: %v", err)
		}
		if keys == nil {
			keys = []string{}
		}
		return okResponse(&abi.KVListResponse{Keys: keys, More: more})
	}})
}

func checkKey(key string) (abi.Status, []byte, bool) {
	if key == "" || len(key) > maxKVKey {
		st, b := errorResponse(abi.StatusBadRequest, "kv: key must be 1..%d bytes, got %d", maxKVKey, len(key))
		return st, b, false
	}
	return abi.StatusOK, nil, true
}

// checkKVRequest is the gate stage of a kv write: the request must decode
// and name a valid key before its intent is journaled.
func checkKVRequest[T any](key func(*T) string) func(*session, *Call) *denial {
	return func(_ *session, c *Call) *denial {
		var r T
		if st, b, ok := decodeRequest(c, &r); !ok {
			return &denial{st, b}
		}
		if st, b, ok := checkKey(key(&r)); !ok {
			return &denial{st, b}
		}
		return nil
	}
}
