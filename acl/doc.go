// Package acl makes every authorization decision of promlib: who may
// publish, subscribe to, replay, inspect and administer which topics:
// topic patterns ([Pattern]), policies of allow and deny rules ([Policy]),
// and OAuth-style scopes turned into policies ([FromScopes]).
//
// # Patterns
//
// A pattern is a topic name ([github.com/promethean/promlib/event.ValidateTopic])
// in which a whole segment may be a wildcard: "*" matches exactly one
// segment, "**" matches zero or more. Wildcards may stand anywhere and more
// than once:
//
//	heartbeat.*      heartbeat.a            (not heartbeat, not heartbeat.a.b)
//	process.**       process, process.a, process.a.b
//	**.dlq           dlq, a.dlq, a.b.dlq
//	a.**.z           a.z, a.b.z, a.b.c.z
//	*.state.**       svc.state, svc.state.x.y
//
// [CompilePattern] checks a pattern and compiles it; a bad pattern is an
// error that names it and says why. [Pattern.Match] runs the compiled
// pattern as an automaton over the topic's segments: its cost is bounded by
// (pattern segments) x (topic segments) whatever the pattern, so patterns
// such as "**.a.**.a.**.x" cannot make a check backtrack exponentially.
//
// # Policies
//
// A [Rule] allows or denies an [Action] (publish, subscribe, replay,
// inspect for ops reads, admin for ops writes such as redrive, or "*" for
// all of them) on the topics matching any of its patterns, optionally only
// for consumer groups matching its group patterns. A [Policy] evaluates all
// its rules: an explicit deny wins over any allow, and what no rule allows is
// refused (default deny). Rule order does not matter. Patterns are compiled
// when the policy is built ([NewPolicy], [ParsePolicy]), so a bad pattern is
// reported then, never at check time.
//
// [Policy.Check] returns nil or an error that wraps [ErrForbidden] and names
// the action and topic (the gateway answers it with "forbidden"). A policy
// has a JSON form, {"rules":[{"effect","action","topics","groups"}]}, which
// a token may carry in its "policy" claim.
//
// # Scopes
//
// [FromScopes] builds a policy of allow rules from scopes of the form
// "<action>:<pattern>": "publish:heartbeat.*", "subscribe:process.**",
// "replay:**", "inspect:orders.**", "admin:orders.**", "*:**". [IsScope] tells such scopes from the other scopes a
// token may carry ("openid", "read:user").
package acl
