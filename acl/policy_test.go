package acl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
)

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	p, err := acl.NewPolicy(
		acl.Rule{Effect: acl.Allow, Action: acl.Publish, Topics: []string{"heartbeat.*", "a.**"}},
		acl.Rule{Effect: acl.Allow, Action: acl.Subscribe, Topics: []string{"process.**"}, Groups: []string{"ui.*"}},
		acl.Rule{Effect: acl.Allow, Action: acl.Subscribe, Topics: []string{"open.*"}},
		acl.Rule{Effect: acl.Allow, Action: acl.AnyAction, Topics: []string{"shared.**"}},
		acl.Rule{Effect: acl.Deny, Action: acl.AnyAction, Topics: []string{"**.secret.**"}},
		acl.Rule{Effect: acl.Deny, Action: acl.Subscribe, Topics: []string{"process.**"}, Groups: []string{"ui.banned"}},
		acl.Rule{Effect: acl.Allow, Action: acl.Replay, Topics: []string{"process.*"}},
	)
	require.NoError(t, err)

	tests := []struct {
		name    string
		action  acl.Action
		topic   string
		group   string
		wantErr error
	}{
		{name: "publish allowed", action: acl.Publish, topic: "heartbeat.svc"},
		{name: "publish deep allowed", action: acl.Publish, topic: "a.b.c"},
		{name: "publish other topic", action: acl.Publish, topic: "b.c", wantErr: acl.ErrForbidden},
		{name: "publish needs publish rule", action: acl.Publish, topic: "process.x", wantErr: acl.ErrForbidden},
		{name: "subscribe with group", action: acl.Subscribe, topic: "process.x", group: "ui.web"},
		{name: "subscribe without group is outside a group rule", action: acl.Subscribe, topic: "process.x", wantErr: acl.ErrForbidden},
		{name: "subscribe other group", action: acl.Subscribe, topic: "process.x", group: "batch", wantErr: acl.ErrForbidden},
		{name: "subscribe rule without groups", action: acl.Subscribe, topic: "open.x", group: "anything"},
		{name: "subscribe rule without groups, no group", action: acl.Subscribe, topic: "open.x"},
		{name: "any action publish", action: acl.Publish, topic: "shared.x"},
		{name: "any action replay", action: acl.Replay, topic: "shared.x.y"},
		{name: "deny wins over allow", action: acl.Publish, topic: "a.secret.b", wantErr: acl.ErrForbidden},
		{name: "deny wins at start", action: acl.Publish, topic: "shared.secret", wantErr: acl.ErrForbidden},
		{name: "deny for one group only", action: acl.Subscribe, topic: "process.x", group: "ui.banned", wantErr: acl.ErrForbidden},
		{name: "replay allowed", action: acl.Replay, topic: "process.x"},
		{name: "replay not deep", action: acl.Replay, topic: "process.x.y", wantErr: acl.ErrForbidden},
		{name: "rule action is not a request action", action: acl.AnyAction, topic: "shared.x", wantErr: acl.ErrInvalid},
		{name: "unknown action", action: "delete", topic: "shared.x", wantErr: acl.ErrInvalid},
		{name: "wildcard topic is not a topic", action: acl.Publish, topic: "a.*", wantErr: acl.ErrInvalid},
		{name: "empty segment", action: acl.Publish, topic: "a..b", wantErr: acl.ErrInvalid},
		{name: "bad group", action: acl.Subscribe, topic: "open.x", group: "g*", wantErr: acl.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := p.Check(tt.action, tt.topic, tt.group)
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.True(t, p.Allowed(tt.action, tt.topic, tt.group))
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.False(t, p.Allowed(tt.action, tt.topic, tt.group))
			if tt.wantErr == acl.ErrForbidden {
				assert.Contains(t, err.Error(), string(tt.action))
				assert.Contains(t, err.Error(), tt.topic)
			}
		})
	}
}

func TestPolicyDefaultDeny(t *testing.T) {
	t.Parallel()
	empty, err := acl.NewPolicy()
	require.NoError(t, err)
	var nilPolicy *acl.Policy
	for _, p := range []*acl.Policy{empty, nilPolicy} {
		err := p.Check(acl.Subscribe, "a.b", "g")
		require.ErrorIs(t, err, acl.ErrForbidden)
		assert.Equal(t, `acl: forbidden: subscribe "a.b" (group "g"): `, err.Error()[:len(`acl: forbidden: subscribe "a.b" (group "g"): `)])
	}
}

func TestAllowEverything(t *testing.T) {
	t.Parallel()
	p := acl.AllowEverything()
	for _, a := range []acl.Action{acl.Publish, acl.Subscribe, acl.Replay} {
		assert.NoError(t, p.Check(a, "any.topic.at.all", ""))
		assert.NoError(t, p.Check(a, "x", "g"))
	}
}

func TestNewPolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rule    acl.Rule
		wantMsg []string
	}{
		{name: "bad effect", rule: acl.Rule{Effect: "maybe", Action: acl.Publish, Topics: []string{"a"}}, wantMsg: []string{"rules[0].effect", `"maybe"`}},
		{name: "no effect", rule: acl.Rule{Action: acl.Publish, Topics: []string{"a"}}, wantMsg: []string{"rules[0].effect"}},
		{name: "bad action", rule: acl.Rule{Effect: acl.Allow, Action: "write", Topics: []string{"a"}}, wantMsg: []string{"rules[0].action", `"write"`}},
		{name: "no topics", rule: acl.Rule{Effect: acl.Allow, Action: acl.Publish}, wantMsg: []string{"rules[0].topics"}},
		{name: "bad topic pattern", rule: acl.Rule{Effect: acl.Allow, Action: acl.Publish, Topics: []string{"ok", "a.b*"}}, wantMsg: []string{"rules[0].topics[1]", `"a.b*"`, "whole segments"}},
		{name: "bad group pattern", rule: acl.Rule{Effect: acl.Allow, Action: acl.Subscribe, Topics: []string{"a"}, Groups: []string{"g..h"}}, wantMsg: []string{"rules[0].groups[0]", "empty segment"}},
		{name: "groups on publish", rule: acl.Rule{Effect: acl.Allow, Action: acl.Publish, Topics: []string{"a"}, Groups: []string{"g"}}, wantMsg: []string{"rules[0].groups", "never apply"}},
		{name: "several problems", rule: acl.Rule{Effect: "x", Action: "y", Topics: []string{"*a"}}, wantMsg: []string{"effect", "action", "topics[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := acl.NewPolicy(tt.rule)
			require.ErrorIs(t, err, acl.ErrInvalid)
			assert.Nil(t, p)
			for _, m := range tt.wantMsg {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}

func TestPolicyCopiesRules(t *testing.T) {
	t.Parallel()
	topics := []string{"a.*"}
	p, err := acl.NewPolicy(acl.Rule{Effect: acl.Allow, Action: acl.Publish, Topics: topics})
	require.NoError(t, err)
	topics[0] = "**"
	assert.Equal(t, "a.*", p.Rules()[0].Topics[0])
	p.Rules()[0].Topics[0] = "**"
	assert.Equal(t, "a.*", p.Rules()[0].Topics[0])
	assert.Error(t, p.Check(acl.Publish, "b.c", ""))
}

func TestPolicyJSON(t *testing.T) {
	t.Parallel()
	doc := `{"rules":[
		{"effect":"allow","action":"publish","topics":["heartbeat.*"]},
		{"effect":"allow","action":"subscribe","topics":["process.**"],"groups":["ui.*"]},
		{"effect":"deny","action":"*","topics":["**.secret"]}
	]}`
	p, err := acl.ParsePolicy([]byte(doc))
	require.NoError(t, err)
	assert.NoError(t, p.Check(acl.Publish, "heartbeat.a", ""))
	assert.NoError(t, p.Check(acl.Subscribe, "process.a.b", "ui.x"))
	assert.ErrorIs(t, p.Check(acl.Subscribe, "process.secret", "ui.x"), acl.ErrForbidden)

	out, err := json.Marshal(p)
	require.NoError(t, err)
	var back acl.Policy
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, p.Rules(), back.Rules())

	// Embedded in a larger document, as in a token's claims.
	var claims struct {
		Policy *acl.Policy `json:"policy"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"policy":`+doc+`}`), &claims))
	require.NotNil(t, claims.Policy)
	assert.NoError(t, claims.Policy.Check(acl.Publish, "heartbeat.b", ""))

	empty, err := json.Marshal(&acl.Policy{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"rules":[]}`, string(empty))
}

func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		doc     string
		wantMsg string
	}{
		{name: "not JSON", doc: `{`, wantMsg: "policy JSON"},
		{name: "not an object", doc: `[]`, wantMsg: "policy JSON"},
		{name: "unknown field", doc: `{"rules":[{"effect":"allow","action":"publish","topic":["a"]}]}`, wantMsg: `unknown field "topic"`},
		{name: "trailing data", doc: `{"rules":[]} {}`, wantMsg: "data after"},
		{name: "bad pattern", doc: `{"rules":[{"effect":"allow","action":"publish","topics":["a.**b"]}]}`, wantMsg: `rules[0].topics[0]`},
		{name: "topics not a list", doc: `{"rules":[{"effect":"allow","action":"publish","topics":"a"}]}`, wantMsg: "policy JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := acl.ParsePolicy([]byte(tt.doc))
			require.ErrorIs(t, err, acl.ErrInvalid)
			assert.Contains(t, err.Error(), tt.wantMsg)
			var p acl.Policy
			err = json.Unmarshal([]byte(tt.doc), &p)
			require.Error(t, err)
			if json.Valid([]byte(tt.doc)) { // else encoding/json refuses it before UnmarshalJSON runs
				assert.ErrorIs(t, err, acl.ErrInvalid)
			}
		})
	}
}

func TestFromScopes(t *testing.T) {
	t.Parallel()
	p, err := acl.FromScopes([]string{"publish:heartbeat.*", "subscribe:process.**", "replay:**", "publish:svc:1.*"})
	require.NoError(t, err)
	tests := []struct {
		name    string
		action  acl.Action
		topic   string
		wantErr error
	}{
		{name: "publish heartbeat", action: acl.Publish, topic: "heartbeat.a"},
		{name: "publish heartbeat deep", action: acl.Publish, topic: "heartbeat.a.b", wantErr: acl.ErrForbidden},
		{name: "publish colon topic", action: acl.Publish, topic: "svc:1.x"},
		{name: "subscribe process", action: acl.Subscribe, topic: "process"},
		{name: "subscribe heartbeat", action: acl.Subscribe, topic: "heartbeat.a", wantErr: acl.ErrForbidden},
		{name: "replay anything", action: acl.Replay, topic: "x.y.z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := p.Check(tt.action, tt.topic, "")
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}

	all, err := acl.FromScopes([]string{"*:**"})
	require.NoError(t, err)
	assert.NoError(t, all.Check(acl.Subscribe, "a.b", "g"))

	none, err := acl.FromScopes(nil)
	require.NoError(t, err)
	assert.ErrorIs(t, none.Check(acl.Publish, "a", ""), acl.ErrForbidden)
}

func TestFromScopesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		scope   string
		wantMsg string
	}{
		{name: "no colon", scope: "publish", wantMsg: "want <action>:<pattern>"},
		{name: "unknown action", scope: "write:a.b", wantMsg: `action "write"`},
		{name: "empty pattern", scope: "publish:", wantMsg: "must not be empty"},
		{name: "bad pattern", scope: "subscribe:a.b*", wantMsg: "whole segments"},
		{name: "empty", scope: "", wantMsg: "want <action>:<pattern>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := acl.FromScopes([]string{"publish:ok", tt.scope})
			require.ErrorIs(t, err, acl.ErrInvalid)
			assert.Contains(t, err.Error(), `scope "`+tt.scope+`"`)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
	_, err := acl.FromScopes([]string{"a", "b:c"})
	require.Error(t, err)
	assert.Equal(t, 2, strings.Count(err.Error(), "scope "), "every bad scope is reported")
}

func TestIsScope(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"publish:a": true, "subscribe:**": true, "replay:x": true, "*:**": true,
		"publish:": true, // the form is right; FromScopes reports the empty pattern
		"openid":   false, "read:user": false, "publish": false, "": false,
	} {
		assert.Equal(t, want, acl.IsScope(s), s)
	}
}

func BenchmarkPolicyCheck(b *testing.B) {
	p, err := acl.FromScopes([]string{"publish:heartbeat.*", "subscribe:process.**", "replay:**", "publish:a.**.z"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Check(acl.Publish, "a.b.c.z", "")
	}
}

// The ops actions: inspect (reads) and admin (writes) parse as scopes and
// are decided apart from each other and from replay.
func TestInspectAdminScopes(t *testing.T) {
	t.Parallel()
	p, err := acl.FromScopes([]string{"inspect:orders.**", "admin:orders.eu"})
	require.NoError(t, err)
	assert.True(t, acl.IsScope("inspect:orders.**"))
	assert.True(t, acl.IsScope("admin:x"))
	assert.NoError(t, p.Check(acl.Inspect, "orders.eu.x", ""))
	assert.NoError(t, p.Check(acl.Inspect, "orders", "g"), "inspect may name a group")
	assert.NoError(t, p.Check(acl.Admin, "orders.eu", ""))
	assert.ErrorIs(t, p.Check(acl.Admin, "orders.us", ""), acl.ErrForbidden)
	assert.ErrorIs(t, p.Check(acl.Replay, "orders.eu", ""), acl.ErrForbidden)
	assert.ErrorIs(t, p.Check(acl.Inspect, "billing", ""), acl.ErrForbidden)

	all, err := acl.FromScopes([]string{"*:**"})
	require.NoError(t, err)
	assert.NoError(t, all.Check(acl.Admin, "a.b", ""), "* is every action")
	assert.NoError(t, acl.AllowEverything().Check(acl.Inspect, "a", ""))

	_, err = acl.ParseScope("purge:orders")
	require.ErrorIs(t, err, acl.ErrInvalid)
	assert.Contains(t, err.Error(), "publish, subscribe, replay, inspect, admin")
	_, err = acl.NewPolicy(acl.Rule{Effect: acl.Allow, Action: acl.Admin, Topics: []string{"a"}, Groups: []string{"g"}})
	assert.ErrorIs(t, err, acl.ErrInvalid, "admin names no group")
}
