package policy

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/agentrt/agentrt/capability"
	"github.com/cedar-policy/cedar-go/types"
)

// Decisions by the gate's layers before the policy (host/gate.go): the
// capability token did not verify, or its claims do not reach the request.
const (
	ByToken      By = "token"
	ByCapability By = "capability"
)

// CapabilityAllows checks a request against the verified claims of a
// capability token, as the gate's capability layer does before the policy:
// the action's capability family must be granted, and the resource within
// it (a kv Namespace among the namespaces, a Host, with the context's port,
// among the hosts, a Tool among the tools; a Run needs the family alone).
// It returns why the request is refused, or "" when it is not.
func CapabilityAllows(c capability.Caps, r Request) string {
	family, _, _ := strings.Cut(r.Action, ".")
	if !c.Has(family) {
		return fmt.Sprintf("capability %s is not granted", family)
	}
	id := string(r.Resource.ID)
	switch r.Resource.Type {
	case "Namespace":
		if !c.AllowsKV(id) {
			return fmt.Sprintf("kv namespace %q is not granted", id)
		}
	case "Host":
		port := ""
		if v, ok := r.Context.Get("port"); ok {
			if p, ok := v.(types.Long); ok {
				port = strconv.FormatInt(int64(p), 10)
			}
		}
		if !c.AllowsHost(net.JoinHostPort(id, port), port) {
			return fmt.Sprintf("host %s:%s is not granted", id, port)
		}
	case "Tool":
		if !c.AllowsTool(id) {
			return fmt.Sprintf("tool %q is not granted", id)
		}
	case "MCPServer":
		if _, ok := c.MCPDigest(id); !ok {
			return fmt.Sprintf("mcp server %q is not granted", id)
		}
	case "Run":
	default:
		return fmt.Sprintf("no capability covers a %s", r.Resource.Type)
	}
	return ""
}
