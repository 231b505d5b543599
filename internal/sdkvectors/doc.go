// Package sdkvectors holds the guest SDKs written in other languages than
// Go to the ABI's test vectors (abi/testdata/vectors, abi/SPEC.md §11.1):
// the C header, guest-sdk/c/agentrt.h, here, through the vector reader of
// internal/abivectors. (The Go SDK's codec is held to them, and to the
// host's codec, in internal/guestabi.)
//
// The runners live in the main module rather than beside the SDKs, because
// guest-sdk is a module of its own that depends on the standard library
// alone, and a runner needs wazero and the host's codec.
package sdkvectors
