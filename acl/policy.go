package acl

import (
	"errors"
	"fmt"
	"slices"

	"github.com/promethean/promlib/event"
)

// Effect is what a matching rule decides.
type Effect string

// Effects of a [Rule].
const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
)

// Action is what a principal asks to do with a topic.
type Action string

// Actions. [AnyAction] is only for rules: a rule with it applies to every
// action; a request always names one concrete action.
const (
	// Publish appends to a topic (gateway PUBLISH, HTTP publish).
	Publish Action = "publish"
	// Subscribe receives a topic's events (gateway SUBSCRIBE).
	Subscribe Action = "subscribe"
	// Replay reads a topic's stored records (replay, export, latest).
	Replay Action = "replay"
	// Inspect reads a topic's operational state (ops: cursors, lag,
	// in-flight deliveries, latest records, dead letters).
	Inspect Action = "inspect"
	// Admin changes a topic's operational state (ops: redrive).
	Admin     Action = "admin"
	AnyAction Action = "*"
)

// actionNames lists the actions in the words of error messages.
const actionNames = "publish, subscribe, replay, inspect, admin"

// known reports whether a is a concrete action (not [AnyAction]).
func (a Action) known() bool {
	switch a {
	case Publish, Subscribe, Replay, Inspect, Admin:
		return true
	}
	return false
}

// Rule is one statement of a [Policy]: Effect for Action on every topic that
// matches one of Topics. When Groups is set the rule only applies to
// requests that name a consumer group matching one of them (subscribe);
// requests without a group (publish, replay, a subscribe without group) are
// outside such a rule.
type Rule struct {
	Effect Effect   `json:"effect"`
	Action Action   `json:"action"`
	Topics []string `json:"topics"`
	Groups []string `json:"groups,omitempty"`
}

type compiledRule struct {
	effect Effect
	action Action
	topics []*Pattern
	groups []*Pattern
}

// Policy is an immutable, compiled set of rules. Evaluation: a request is
// refused if any rule that applies to it denies it (explicit deny wins),
// allowed if a rule that applies allows it, and refused otherwise (default
// deny). Rule order does not matter. A nil *Policy refuses everything.
//
// Build one with [NewPolicy], [FromScopes], [AllowEverything] or from JSON
// ([ParsePolicy], or json.Unmarshal into a Policy). A Policy is safe for
// concurrent use.
type Policy struct {
	rules    []Rule
	compiled []compiledRule
}

// NewPolicy validates and compiles rules. Every problem is reported, joined
// with errors.Join, each naming the rule index and field; each wraps
// [ErrInvalid]. No rules is valid: that policy refuses everything.
func NewPolicy(rules ...Rule) (*Policy, error) {
	p := &Policy{
		rules:    make([]Rule, 0, len(rules)),
		compiled: make([]compiledRule, 0, len(rules)),
	}
	var errs []error
	for i, r := range rules {
		c, err := compileRule(fmt.Sprintf("rules[%d]", i), r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.rules = append(p.rules, cloneRule(r))
		p.compiled = append(p.compiled, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// AllowEverything returns a policy that allows every action on every
// topic, for a principal that is trusted with everything (e.g. a static
// shared token).
func AllowEverything() *Policy {
	p, err := NewPolicy(Rule{Effect: Allow, Action: AnyAction, Topics: []string{"**"}})
	if err != nil {
		panic(err) // a constant rule; unreachable
	}
	return p
}

func compileRule(name string, r Rule) (compiledRule, error) {
	var errs []error
	switch r.Effect {
	case Allow, Deny:
	default:
		errs = append(errs, invalid(name+".effect", "%q is not %q or %q", r.Effect, Allow, Deny))
	}
	switch {
	case r.Action.known() || r.Action == AnyAction:
		if len(r.Groups) > 0 && r.Action != Subscribe && r.Action != Inspect && r.Action != AnyAction {
			errs = append(errs, invalid(name+".groups", "only subscribe and inspect name a group, so a %s rule with groups would never apply", r.Action))
		}
	default:
		errs = append(errs, invalid(name+".action", "%q is not one of %s, *", r.Action, actionNames))
	}
	if len(r.Topics) == 0 {
		errs = append(errs, invalid(name+".topics", "must name at least one pattern"))
	}
	c := compiledRule{effect: r.Effect, action: r.Action}
	compile := func(field string, srcs []string) []*Pattern {
		out := make([]*Pattern, 0, len(srcs))
		for j, s := range srcs {
			pat, err := CompilePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%s[%d]: %w", name, field, j, err))
				continue
			}
			out = append(out, pat)
		}
		return out
	}
	c.topics = compile("topics", r.Topics)
	c.groups = compile("groups", r.Groups)
	return c, errors.Join(errs...)
}

func cloneRule(r Rule) Rule {
	r.Topics = slices.Clone(r.Topics)
	r.Groups = slices.Clone(r.Groups)
	return r
}

// Rules returns a copy of the policy's rules.
func (p *Policy) Rules() []Rule {
	if p == nil {
		return nil
	}
	out := make([]Rule, len(p.rules))
	for i, r := range p.rules {
		out[i] = cloneRule(r)
	}
	return out
}

// Check decides a request: nil means allowed. A refusal wraps
// [ErrForbidden] and names the action, topic and group; a bad action, topic
// or group wraps [ErrInvalid] (it is refused too: any error means no).
// group is empty for publish, replay and admin, and for a subscribe or
// inspect request without group.
func (p *Policy) Check(action Action, topic, group string) error {
	if !action.known() {
		return invalid("action", "%q is not one of %s", action, actionNames)
	}
	if err := event.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if group != "" {
		if err := event.ValidateGroup(group); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if p == nil {
		return forbidden(action, topic, group, "no policy")
	}
	allowed := false
	for i := range p.compiled {
		r := &p.compiled[i]
		if !r.applies(action, topic, group) {
			continue
		}
		if r.effect == Deny {
			return forbidden(action, topic, group, fmt.Sprintf("denied by rule %d", i))
		}
		allowed = true
	}
	if !allowed {
		return forbidden(action, topic, group, "no rule allows it")
	}
	return nil
}

// Allowed reports whether [Policy.Check] returns nil.
func (p *Policy) Allowed(action Action, topic, group string) bool {
	return p.Check(action, topic, group) == nil
}

func (r *compiledRule) applies(action Action, topic, group string) bool {
	if r.action != AnyAction && r.action != action {
		return false
	}
	if !matchAny(r.topics, topic) {
		return false
	}
	if len(r.groups) > 0 {
		return group != "" && matchAny(r.groups, group)
	}
	return true
}

func matchAny(pats []*Pattern, s string) bool {
	for _, p := range pats {
		if p.Match(s) {
			return true
		}
	}
	return false
}

func forbidden(action Action, topic, group, why string) error {
	if group != "" {
		return fmt.Errorf("%w: %s %q (group %q): %s", ErrForbidden, action, topic, group, why)
	}
	return fmt.Errorf("%w: %s %q: %s", ErrForbidden, action, topic, why)
}
