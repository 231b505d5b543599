package host_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/agentrt/agentrt/host"
)

// FuzzParseGrant parses arbitrary grant files: parsing never panics, and a
// grant that parses passes Check and survives the trip through its
// canonical CBOR (the form recorded in a run header) unchanged, so that a
// replay or an audit reads back exactly the grant the run had.
func FuzzParseGrant(f *testing.F) {
	for _, s := range []string{
		"capabilities: {run: {}}\n",
		"capabilities:\n  run: {}\n  kv: {namespace: crawler}\n  http: {hosts: [\"127.0.0.1:8080\", example.com]}\n",
		"capabilities: {clock: {}, random: {}}\n",
		`{"capabilities": {"kv": {"namespace": "a"}, "http": {"hosts": ["h:1"]}}}`,
		"capabilities: {}\n",
		"capabilities: {kv: {namespace: \"\"}}\n",
		"capabilities: {http: {hosts: [\"a/b\"]}}\n",
		"capabilities: {runn: {}}\n",
		"capabilities: {kv: &a {namespace: x}, run: *a}\n",
		"capabilities: {kv: {namespace: !!binary Y3Jhd2xlcg==}}\n",
		"capabilities:\n  tool:\n    tools:\n      - {name: g, exec: /usr/bin/grep, args: {fixed: [-c], flags: [{name: -i}], positional: [{pattern: 'x+', path: ro}], max: 2}, read: [/usr], workspace: true, env: {A: b}, limits: {wall: 1s, procs: 4}, idempotent: true}\n",
		"capabilities: {tool: {tools: [{name: g, exec: /g, read: [], write: [], env: {}, args: {fixed: [], flags: [], positional: []}}]}}\n",
		"capabilities: {tool: {tools: [{name: g, exec: /g, network: none, limits: {memory: 0, output: 16MiB}}]}}\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		g, err := host.ParseGrant(in)
		if err != nil {
			return
		}
		if err := g.Check(); err != nil {
			t.Fatalf("ParseGrant returned a grant that fails Check: %v", err)
		}
		b, err := g.Canonical()
		if err != nil {
			t.Fatalf("parsed grant has no canonical form: %v", err)
		}
		back, err := host.DecodeGrant(b)
		if err != nil {
			t.Fatalf("canonical form %x of a parsed grant does not decode: %v", b, err)
		}
		if !reflect.DeepEqual(back, g) {
			t.Fatalf("round trip changed the grant: %+v, want %+v", back, g)
		}
		again, err := back.Canonical()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("canonical form is not stable: %x then %x (%v)", b, again, err)
		}
	})
}
