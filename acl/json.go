package acl

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// policyJSON is the JSON form of a Policy: {"rules":[{"effect":"allow",
// "action":"publish","topics":["a.*"]}, ...]}.
type policyJSON struct {
	Rules []Rule `json:"rules"`
}

// ParsePolicy decodes and compiles a policy from its JSON form:
//
//	{"rules": [
//	  {"effect": "allow", "action": "publish",   "topics": ["heartbeat.*"]},
//	  {"effect": "allow", "action": "subscribe", "topics": ["process.**"], "groups": ["ui.*"]},
//	  {"effect": "deny",  "action": "*",         "topics": ["secret.**"]}
//	]}
//
// Unknown fields are errors (a misspelt "topic" must not silently widen or
// narrow a rule). Errors wrap [ErrInvalid].
func ParsePolicy(data []byte) (*Policy, error) {
	var doc policyJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: policy JSON: %w", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: policy JSON: data after the policy object", ErrInvalid)
	}
	return NewPolicy(doc.Rules...)
}

// MarshalJSON encodes the policy in the form [ParsePolicy] reads.
func (p *Policy) MarshalJSON() ([]byte, error) {
	rules := p.Rules()
	if rules == nil {
		rules = []Rule{}
	}
	return json.Marshal(policyJSON{Rules: rules})
}

// UnmarshalJSON decodes and compiles a policy as [ParsePolicy] does.
func (p *Policy) UnmarshalJSON(data []byte) error {
	q, err := ParsePolicy(data)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}
