package capability_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/capability"
)

// A cell issues a token for an agent; the agent delegates a narrower token
// to a sub-agent; the cell verifies what the sub-agent presents, sealed.
// A delegation that tries to add a tool is refused, and so is the
// sub-agent's token with its last link dropped: its proof is for the link
// it dropped.
func Example() {
	cell := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grep, _ := capability.ToolDecl{Name: "grep", Exec: "/usr/bin/grep", Read: []string{"/usr", "/srv/repo"}}.Digest()
	ls, _ := capability.ToolDecl{Name: "ls", Exec: "/usr/bin/ls", Read: []string{"/srv/repo"}}.Digest()

	// No subject named: the token carries a new key, its proof.
	root, err := capability.Issue(cell, capability.Claims{
		Caps: capability.Caps{
			Run:  &capability.Unit{},
			HTTP: &capability.HTTP{Hosts: []string{"api.example.com"}},
			Tool: &capability.Tool{Tools: map[string]capability.Digest{"grep": grep, "ls": ls}},
		},
		Budget:    capability.Budget{WallSeconds: capability.Limit(3600)},
		NotBefore: now,
		Expires:   now.Add(24 * time.Hour),
	})
	if err != nil {
		panic(err)
	}
	// The agent attenuates with the key root carries (nil: that key); the
	// child carries a new key of its own.
	child, err := capability.Attenuate(root, nil, capability.Claims{
		Caps: capability.Caps{
			Run:  &capability.Unit{},
			HTTP: &capability.HTTP{Hosts: []string{"api.example.com:443"}},
			Tool: &capability.Tool{Tools: map[string]capability.Digest{"grep": nil}}, // nil: the parent's declaration
		},
		Budget:  capability.Budget{WallSeconds: capability.Limit(600)},
		Expires: now.Add(time.Hour),
	})
	if err != nil {
		panic(err)
	}
	sealed, err := capability.Seal(child, nil)
	if err != nil {
		panic(err)
	}

	roots := []ed25519.PublicKey{cell.Public().(ed25519.PublicKey)}
	v, err := capability.Verify(sealed, roots, capability.Options{Now: now.Add(time.Minute), IgnoreAudience: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("families:", v.Claims.Caps.Families(), "proof:", v.Proof)
	fmt.Println("grep:", v.Claims.Caps.AllowsTool("grep"), "ls:", v.Claims.Caps.AllowsTool("ls"))
	d, _ := v.Claims.Caps.ToolDigest("grep")
	fmt.Println("grep bound to its declaration:", bytes.Equal(d, grep))
	fmt.Println("api.example.com:443:", v.Claims.Caps.AllowsHost("api.example.com", "443"),
		"api.example.com:8443:", v.Claims.Caps.AllowsHost("api.example.com:8443", "443"))
	fmt.Println("budget:", v.Claims.Budget)

	_, err = capability.Attenuate(root, nil, capability.Claims{
		Caps: capability.Caps{Tool: &capability.Tool{Tools: map[string]capability.Digest{"grep": nil, "rm": nil}}},
	})
	fmt.Println(errors.Is(err, capability.ErrWidens), err)

	// The child without its last link is the root's links with the
	// child's key: not the root's subject.
	t, _ := capability.Parse(child)
	t.Links = t.Links[:1]
	_, err = capability.Verify(t.Bytes(), roots, capability.Options{Now: now.Add(time.Minute), IgnoreAudience: true})
	fmt.Println(errors.Is(err, capability.ErrProof))
	// Output:
	// families: [run http tool] proof: seal
	// grep: true ls: false
	// grep bound to its declaration: true
	// api.example.com:443: true api.example.com:8443: false
	// budget: wall_seconds=600
	// true capability token: link 1: widens its parent: tool "rm" is not in the parent's tools
	// true
}
