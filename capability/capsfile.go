package capability

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ParseCapsFile parses the capabilities (and optional budget) of a token
// from YAML or JSON. Unknown keys are an error, so a misspelt capability
// never silently allows less or more. The capabilities map is the host's
// grant file format, so a grant file can be used as it is; kv also takes a
// list of namespaces.
//
//	capabilities:
//	  run: {}
//	  kv: {namespaces: [crawler]}      # or {namespace: crawler}
//	  http: {hosts: ["example.com", "127.0.0.1:8080"]}
//	  tool: {names: [grep]}            # or a grant's {tools: [{name: grep, exec: ...}]}
//	budget:
//	  steps: 1000
//	  http_requests: 20
func ParseCapsFile(b []byte) (Caps, Budget, error) {
	var doc struct {
		Capabilities *struct {
			Run *Unit `yaml:"run"`
			KV  *struct {
				Namespace  string   `yaml:"namespace"`
				Namespaces []string `yaml:"namespaces"`
			} `yaml:"kv"`
			HTTP   *HTTP `yaml:"http"`
			Clock  *Unit `yaml:"clock"`
			Random *Unit `yaml:"random"`
			Tool   *struct {
				Names []string `yaml:"names"`
				// A grant file's tool registry: a token carries the
				// names; what each tool runs stays in the grant.
				Tools []struct {
					Name string         `yaml:"name"`
					Rest map[string]any `yaml:",inline"`
				} `yaml:"tools"`
			} `yaml:"tool"`
		} `yaml:"capabilities"`
		Budget Budget `yaml:"budget"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return Caps{}, Budget{}, fmt.Errorf("parse: %w", err)
	}
	if doc.Capabilities == nil {
		return Caps{}, Budget{}, fmt.Errorf("no 'capabilities' map (write e.g. capabilities: {run: {}})")
	}
	d := doc.Capabilities
	c := Caps{Run: d.Run, HTTP: d.HTTP, Clock: d.Clock, Random: d.Random}
	if d.Tool != nil {
		c.Tool = &Tool{Names: d.Tool.Names}
		for _, t := range d.Tool.Tools {
			c.Tool.Names = append(c.Tool.Names, t.Name)
		}
	}
	if d.KV != nil {
		c.KV = &KV{Namespaces: d.KV.Namespaces}
		if d.KV.Namespace != "" {
			c.KV.Namespaces = append(c.KV.Namespaces, d.KV.Namespace)
		}
	}
	c.Normalize()
	if err := c.Check(); err != nil {
		return Caps{}, Budget{}, err
	}
	return c, doc.Budget, nil
}
