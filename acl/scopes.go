package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ParseScope turns one scope "<action>:<pattern>" into an allow rule:
// "publish:heartbeat.*", "subscribe:process.**", "replay:**",
// "inspect:orders.**", "admin:orders.**", "*:**". The
// action is the text before the first ':' (topic names may contain ':', so
// "publish:svc:a.b" is publish on "svc:a.b"). Errors wrap [ErrInvalid] and
// name the scope.
func ParseScope(scope string) (Rule, error) {
	action, pattern, ok := strings.Cut(scope, ":")
	if !ok {
		return Rule{}, fmt.Errorf("%w: scope %q: want <action>:<pattern>, e.g. publish:orders.*", ErrInvalid, scope)
	}
	if a := Action(action); !a.known() && a != AnyAction {
		return Rule{}, fmt.Errorf("%w: scope %q: action %q is not one of %s, *", ErrInvalid, scope, action, actionNames)
	}
	if _, err := CompilePattern(pattern); err != nil {
		return Rule{}, fmt.Errorf("scope %q: %w", scope, err)
	}
	return Rule{Effect: Allow, Action: Action(action), Topics: []string{pattern}}, nil
}

// IsScope reports whether s has the form of an ACL scope: one of the
// actions, then ':'. Token scopes often mix in others ("openid",
// "read:user"); IsScope picks out the ones [FromScopes] is for. It does not
// check the pattern.
func IsScope(s string) bool {
	action, _, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	a := Action(action)
	return a.known() || a == AnyAction
}

// FromScopes builds a policy with one allow rule per scope (see
// [ParseScope]). Every bad scope is reported, joined with errors.Join. No
// scopes gives a policy that refuses everything.
func FromScopes(scopes []string) (*Policy, error) {
	rules := make([]Rule, 0, len(scopes))
	var errs []error
	for _, s := range scopes {
		r, err := ParseScope(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return NewPolicy(rules...)
}
