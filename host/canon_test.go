package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// TestToolPathsAreCanonicalForThePolicy: a customer policy forbids a tool
// to read DIR/secret. The agent names that file as ./secret, secret,
// DIR//secret, DIR/./secret and DIR/secret/: the policy sees one path
// (context.paths) and denies each before anything is launched; a ".."
// is refused by the capability layer.
func TestToolPathsAreCanonicalForThePolicy(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	env := testutil.NewEnv(t, host.Deps{Policy: platformPolicy(t,
		"@id(\"acme.allow\") permit (principal, action, resource);\n"+
			"@id(\"acme.no-secret\") forbid (principal, action == Action::\"tool.run\", resource) when { context.paths.contains(\""+secret+"\") };\n")}, host.Config{})
	g, err := host.ParseGrant([]byte(`capabilities:
  run: {}
  tool:
    tools:
      - name: cat
        exec: /bin/cat
        args: {positional: [{pattern: '.+', path: ro}]}
        read: [/usr, /lib, /lib64, /bin, ` + dir + `]
        workdir: ` + dir + `
`))
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		Tool string   `json:"tool"`
		Args []string `json:"args"`
	}
	var steps []step
	spellings := []string{"./secret", "secret", dir + "//secret", dir + "/./secret", dir + "/secret/", "sub/../secret"}
	for _, p := range spellings {
		steps = append(steps, step{Tool: "cat", Args: []string{p}})
	}
	in, _ := json.Marshal(steps)
	res, err := env.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/tools"), Grant: g, Input: in})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	var out []struct {
		Err    string          `json:"err"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out) != len(steps) {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	for i, o := range out[:5] {
		if !strings.Contains(o.Err, "denied: policy: denied by customer:acme.no-secret") || o.Result != nil {
			t.Errorf("%q: %q (result %s), want denied by the customer's policy on %s", spellings[i], o.Err, o.Result, secret)
		}
	}
	if !strings.Contains(out[5].Err, "denied: tool.run: tool cat:") || !strings.Contains(out[5].Err, "'..'") {
		t.Errorf("%q: %q, want the capability layer's refusal of '..'", spellings[5], out[5].Err)
	}
}
