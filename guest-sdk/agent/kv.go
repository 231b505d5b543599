package agent

import "github.com/agentrt/agentrt/guest-sdk/abi"

// KVGet returns the value of key in the agent's durable state, or an error
// matching ErrNotFound.
func KVGet(key string) ([]byte, error) {
	var r abi.KVGetResponse
	err := call(kvTransport, abi.CapKV, abi.OpKVGet, &abi.KVGetRequest{Key: key}, &r)
	return r.Value, err
}

// KVPut durably sets key. The write and its journal entries commit
// together, atomically: it happens exactly once, or not at all.
func KVPut(key string, value []byte) error {
	return call(kvTransport, abi.CapKV, abi.OpKVPut, &abi.KVPutRequest{Key: key, Value: value}, nil)
}

// KVDelete removes key and reports whether it existed.
func KVDelete(key string) (bool, error) {
	var r abi.KVDeleteResponse
	err := call(kvTransport, abi.CapKV, abi.OpKVDelete, &abi.KVDeleteRequest{Key: key}, &r)
	return r.Existed, err
}

// KVList returns keys starting with prefix, in byte order, after the key
// after (exclusive; "" to start), at most limit of them (0: the host's
// default), and whether more remain.
func KVList(prefix, after string, limit uint32) ([]string, bool, error) {
	var r abi.KVListResponse
	err := call(kvTransport, abi.CapKV, abi.OpKVList, &abi.KVListRequest{Prefix: prefix, After: after, Limit: limit}, &r)
	return r.Keys, r.More, err
}
