package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cedar-policy/cedar-go/types"
)

// RequestJSON is the JSON form of a Request, used by the parity fixtures and
// by `agentrt policy check --request FILE`:
//
//	{
//	  "principal": {"type": "Run", "id": "r1"},
//	  "action": "http.request",
//	  "resource": {"type": "Host", "id": "api.example.com"},
//	  "context": {"mode": "unattended", ...},
//	  "entities": [{"uid": {...}, "attrs": {...}, "parents": [...]}, ...]
//	}
//
// principal, resource, context and entities use Cedar's JSON formats
// (entity references, values with "__extn" for extension types, and the
// entities array), so any Cedar implementation reads them. action is an op
// name. Unknown members are an error. Hosts are put in canonical form
// (CanonicalizeHosts), as the gate builds them.
type RequestJSON struct {
	Principal json.RawMessage `json:"principal"`
	Action    string          `json:"action"`
	Resource  json.RawMessage `json:"resource"`
	Context   json.RawMessage `json:"context,omitempty"`
	Entities  json.RawMessage `json:"entities,omitempty"`
}

// ParseRequest decodes a request in its JSON form.
func ParseRequest(b []byte) (Request, error) {
	var rj RequestJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return Request{}, fmt.Errorf("request: %w", err)
	}
	return rj.Request()
}

// Request converts the JSON form to a Request.
func (rj RequestJSON) Request() (Request, error) {
	r := Request{Action: rj.Action}
	if len(rj.Principal) == 0 || len(rj.Resource) == 0 || rj.Action == "" {
		return r, fmt.Errorf("request: principal, action and resource are required")
	}
	if err := r.Principal.UnmarshalJSON(rj.Principal); err != nil {
		return r, fmt.Errorf("request: principal: %w", err)
	}
	if err := r.Resource.UnmarshalJSON(rj.Resource); err != nil {
		return r, fmt.Errorf("request: resource: %w", err)
	}
	if len(rj.Context) > 0 {
		if err := r.Context.UnmarshalJSON(rj.Context); err != nil {
			return r, fmt.Errorf("request: context: %w", err)
		}
	}
	r.Entities = types.EntityMap{}
	if len(rj.Entities) > 0 {
		if err := r.Entities.UnmarshalJSON(rj.Entities); err != nil {
			return r, fmt.Errorf("request: entities: %w", err)
		}
	}
	return r, CanonicalizeHosts(&r)
}
