package policy_test

import (
	"fmt"

	"github.com/agentrt/agentrt/policy"
	"github.com/cedar-policy/cedar-go/types"
)

// A customer forbids HTTP POSTs. A GET passes both sets; a POST passes the
// platform and is denied by the customer; the permission modes never get to
// lift that denial.
func ExampleEngine_Decide() {
	customer := []policy.Source{{Name: "acme.cedar", Text: []byte(`
@id("acme.allow") permit (principal, action, resource);
@id("acme.no-post") forbid (principal, action == Action::"http.request", resource)
when { context.method == "POST" };
`)}}
	engine, err := policy.NewEngine(policy.Platform(), customer)
	if err != nil {
		panic(err)
	}
	run := types.NewEntityUID("Run", "r1")
	host := types.NewEntityUID("Host", "api.example.com")
	request := func(method string) policy.Request {
		return policy.Request{
			Principal: run,
			Action:    "http.request",
			Resource:  host,
			Context: types.NewRecord(types.RecordMap{
				"mode":      types.String("unattended"),
				"spent":     types.NewRecord(types.RecordMap{"calls": types.Long(0), "tokens": types.Long(0), "micros": types.Long(0)}),
				"clearance": types.Long(0),
				"time":      types.Long(1767225600),
				"method":    types.String(method),
				"scheme":    types.String("https"),
				"port":      types.Long(443),
				"path":      types.String("/orders"),
			}),
			Entities: types.EntityMap{
				run:  {UID: run, Attributes: types.NewRecord(types.RecordMap{"id": types.String("r1")})},
				host: {UID: host, Attributes: types.NewRecord(types.RecordMap{"name": types.String("api.example.com")})},
			},
		}
	}
	modes, err := policy.ParseModes([]byte("rules:\n  - {name: post-is-fine, op: http.request, method: POST, effect: allow}\n"))
	if err != nil {
		panic(err)
	}
	for _, method := range []string{"GET", "POST"} {
		r := request(method)
		d := engine.Decide(r)
		fmt.Printf("%s: %s", method, d.Explain())
		fmt.Printf("  modes: %s\n", modes.Apply(d, policy.CallOf(r)).Effect)
	}
	// Output:
	// GET: allowed by the platform and customer policies
	//   determining: customer:acme.allow
	//   determining: platform:platform.allow-granted
	//   modes: allow
	// POST: denied by the customer policies
	//   determining: customer:acme.no-post
	//   modes: deny
}
