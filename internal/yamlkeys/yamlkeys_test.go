package yamlkeys

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type limits struct {
	Wall   string `yaml:"wall"`
	Memory string `yaml:"memory,omitempty"`
}

type tool struct {
	Name   string            `yaml:"name"`
	Env    map[string]string `yaml:"env"`
	Limits limits            `yaml:"limits"`
	Raw    yaml.Node         `yaml:"raw"`
	Skip   string            `yaml:"-"`
	Plain  int
}

type doc struct {
	Caps *struct {
		Run   *struct{} `yaml:"run"`
		Tools []tool    `yaml:"tools"`
	} `yaml:"capabilities"`
	Extra map[string]any `yaml:",inline"`
}

type strict struct {
	Caps *struct {
		Run *struct{} `yaml:"run"`
	} `yaml:"capabilities"`
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		typ       reflect.Type
		want      string
	}{
		{"fine", "capabilities:\n  run: {}\n  tools:\n    - {name: a, env: {ANY: x}, limits: {wall: 1s}, raw: {whatever: 1}, plain: 3}\n", reflect.TypeOf(doc{}), ""},
		{"inline map takes any key", "other: 1\ncapabilities: {run: {}}\n", reflect.TypeOf(doc{}), ""},
		{"nested, with the nearest", "capabilities:\n  tools:\n    - name: a\n    - name: b\n      limits: {wal: 1s}\n", reflect.TypeOf(doc{}),
			`line 5: unknown key "wal" in capabilities.tools[1].limits; allowed: wall, memory (did you mean wall?)`},
		{"a swap is one edit", "capabilities:\n  tools: [{nmae: a}]\n", reflect.TypeOf(doc{}),
			`line 2: unknown key "nmae" in capabilities.tools[0]; allowed: name, env, limits, raw, plain (did you mean name?)`},
		{"nothing near", "capabilities:\n  tools: [{zzzzzz: a}]\n", reflect.TypeOf(doc{}),
			`line 2: unknown key "zzzzzz" in capabilities.tools[0]; allowed: name, env, limits, raw, plain`},
		{"the top level", "capabilites: {}\n", reflect.TypeOf(strict{}),
			`line 1: unknown key "capabilites" at the top level; allowed: capabilities (did you mean capabilities?)`},
		{"a section without keys", "capabilities:\n  run: {namespace: x}\n", reflect.TypeOf(strict{}),
			`line 2: unknown key "namespace" in capabilities.run, which takes no keys (write run: {})`},
		{"JSON", `{"capabilities": {"Run": {}}}`, reflect.TypeOf(strict{}),
			`line 1: unknown key "Run" in capabilities; allowed: run (did you mean run?)`},
		{"through an alias", "x: &l {wal: 1s}\ncapabilities:\n  tools: [{name: a, limits: *l}]\n", reflect.TypeOf(doc{}),
			`line 1: unknown key "wal" in capabilities.tools[0].limits; allowed: wall, memory (did you mean wall?)`},
		{"through a merge", "capabilities:\n  tools:\n    - <<: {nam: a}\n", reflect.TypeOf(doc{}),
			`line 3: unknown key "nam" in capabilities.tools[0]; allowed: name, env, limits, raw, plain (did you mean name?)`},
		{"not YAML: the decoder's to say", "capabilities: [\n", reflect.TypeOf(strict{}), ""},
		{"a long key", "capabilities:\n  " + strings.Repeat("k", 100) + ": 1\n", reflect.TypeOf(strict{}),
			`line 2: unknown key "` + strings.Repeat("k", 64) + `..." in capabilities; allowed: run`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), tc.typ)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var uk *UnknownKeyError
			if !errors.As(err, &uk) || err.Error() != tc.want {
				t.Fatalf("Check:\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// tree nests without end, as an alias bomb needs.
type tree struct {
	Kids []tree `yaml:"kids"`
}

// TestCheckAliasBomb: aliases of aliases (a billion laughs: 10^30 uses of
// one node) are walked once each, not once per use.
func TestCheckAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("n0: &n0 {kids: []}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "n%d: &n%d {kids: [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*n%d", i-1)
		}
		b.WriteString("]}\n")
	}
	b.WriteString("top: *n30\n")
	type doc struct {
		N   map[string]tree `yaml:",inline"`
		Top tree            `yaml:"top"`
	}
	if err := Check([]byte(b.String()), reflect.TypeOf(doc{})); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(b.String(), "n0: &n0 {kids: []}", "n0: &n0 {kids: [], kid: 1}", 1)
	if err := Check([]byte(bad), reflect.TypeOf(doc{})); err == nil || !strings.Contains(err.Error(), `unknown key "kid"`) {
		t.Fatalf("Check: %v, want the unknown key kid", err)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"namespace", "hosts", "idempotent"}
	for key, want := range map[string]string{"namepsace": "namespace", "host": "hosts", "idempotnet": "idempotent", "Hosts": "hosts", "xyz": "", "namespaces": "namespace"} {
		if got := nearest(key, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", key, got, want)
		}
	}
}
