package capability_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/capability"
)

// A cell issues a token to an agent's key; the agent delegates a narrower
// token to a sub-agent; the cell verifies what the sub-agent presents. A
// delegation that tries to add a tool is refused.
func Example() {
	cell := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	agent := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	sub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	root, err := capability.Issue(cell, capability.Claims{
		Subject: agent.Public().(ed25519.PublicKey),
		Caps: capability.Caps{
			Run:  &capability.Unit{},
			HTTP: &capability.HTTP{Hosts: []string{"api.example.com"}},
			Tool: &capability.Tool{Names: []string{"grep", "ls"}},
		},
		Budget:    capability.Budget{Steps: capability.Limit(1000)},
		NotBefore: now,
		Expires:   now.Add(24 * time.Hour),
	})
	if err != nil {
		panic(err)
	}
	child, err := capability.Attenuate(root, agent, capability.Claims{
		Subject: sub.Public().(ed25519.PublicKey),
		Caps: capability.Caps{
			Run:  &capability.Unit{},
			HTTP: &capability.HTTP{Hosts: []string{"api.example.com:443"}},
			Tool: &capability.Tool{Names: []string{"grep"}},
		},
		Budget:  capability.Budget{Steps: capability.Limit(100)},
		Expires: now.Add(time.Hour),
	})
	if err != nil {
		panic(err)
	}

	v, err := capability.Verify(child, []ed25519.PublicKey{cell.Public().(ed25519.PublicKey)},
		capability.Options{Now: now.Add(time.Minute), Nonces: capability.NewMemoryNonces(0)})
	if err != nil {
		panic(err)
	}
	fmt.Println("families:", v.Claims.Caps.Families())
	fmt.Println("grep:", v.Claims.Caps.AllowsTool("grep"), "ls:", v.Claims.Caps.AllowsTool("ls"))
	fmt.Println("api.example.com:443:", v.Claims.Caps.AllowsHost("api.example.com", "443"),
		"api.example.com:8443:", v.Claims.Caps.AllowsHost("api.example.com:8443", "443"))
	fmt.Println("budget:", v.Claims.Budget)

	_, err = capability.Attenuate(root, agent, capability.Claims{
		Caps: capability.Caps{Tool: &capability.Tool{Names: []string{"grep", "rm"}}},
	})
	fmt.Println(errors.Is(err, capability.ErrWidens), err)
	// Output:
	// families: [run http tool]
	// grep: true ls: false
	// api.example.com:443: true api.example.com:8443: false
	// budget: steps=100
	// true capability token: link 1: widens its parent: tool "rm" is not in the parent's tools
}
