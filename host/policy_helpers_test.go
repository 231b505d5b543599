package host_test

import (
	"fmt"
	"testing"

	"github.com/agentrt/agentrt/policy"
)

// platformPolicy is the platform's policy set with the customer sets given.
func platformPolicy(t *testing.T, customer ...string) *policy.Engine {
	t.Helper()
	var cs []policy.Source
	for i, c := range customer {
		cs = append(cs, policy.Source{Name: fmt.Sprintf("customer%d.cedar", i), Text: []byte(c)})
	}
	e, err := policy.NewEngine(policy.Platform(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
