package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// promctl help and -h print usage with status 0; a bad command line is
// one line naming the flag or argument, with status 2, before anything
// is sent.
func TestUsage(t *testing.T) {
	t.Parallel()
	r := promctl(t, "", "help").ok(t)
	assert.Equal(t, r.stdout, promctl(t, "", "-h").ok(t).stdout)
	for name := range commands {
		assert.Contains(t, r.stdout, "\n  "+name+" ", "promctl help lists %s", name)
	}
	for name, c := range commands {
		r := promctl(t, "", name, "-h").ok(t)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: promctl "+name+" "+c.Synopsis+"\n"), r.stdout)
		assert.Contains(t, r.stdout, "-url")
		assert.Equal(t, r.stdout, promctl(t, "", "help", name).ok(t).stdout)
	}
	assert.Contains(t, promctl(t, "", "publish", "-h").ok(t).stdout, "-header k=v")

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"missing command"}},
		{[]string{"nope"}, []string{`unknown command "nope"`, "topics"}},
		{[]string{"help", "nope"}, []string{`unknown command "nope"`}},
		{[]string{"-bogus", "topics"}, []string{"-bogus"}},
		{[]string{"topics", "-bogus"}, []string{"topics:", "-bogus"}},
		{[]string{"topics", "-o", "yaml"}, []string{"topics: -o:", `"yaml"`, "table or json"}},
		{[]string{"topics", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"topics", "bad topic"}, []string{"topics: TOPIC:"}},
		{[]string{"publish"}, []string{"publish: missing TOPIC"}},
		{[]string{"publish", "t.usage", "{"}, []string{"PAYLOAD: not JSON"}},
		{[]string{"publish", "t.usage", "1", "-header", "novalue"}, []string{"-header", `"novalue", want k=v`}},
		{[]string{"tail", "t.usage", "-from", "middle"}, []string{"-from:", `"middle"`, "seq:N"}},
		{[]string{"tail", "t.usage", "-from", "seq:0"}, []string{"-from:", "from 1"}},
		{[]string{"tail", "t.usage", "-n", "-1"}, []string{"-n: -1"}},
		{[]string{"tail", "t.usage", "-group", "a b"}, []string{"-group:"}},
		{[]string{"dlq", "peek", "t.usage", "g"}, []string{`unknown action "peek"`}},
		{[]string{"dlq", "list", "t.usage"}, []string{"dlq: missing GROUP"}},
		{[]string{"dlq", "list", "t.usage", "g", "-ids", "a"}, []string{"-ids: only with redrive or purge"}},
		{[]string{"dlq", "purge", "t.usage", "g", "-ids", "a,,b"}, []string{"-ids:", "empty id"}},
		{[]string{"cursor", "reset", "t.usage", "g"}, []string{"-to: required"}},
		{[]string{"cursor", "reset", "t.usage", "g", "-to", "seq:x"}, []string{"-to:", `"seq:x"`}},
		{[]string{"cursor", "move", "t.usage", "g", "-to", "latest"}, []string{`unknown action "move", want reset`}},
		{[]string{"group", "remove", "t.usage", "g"}, []string{`unknown action "remove", want delete`}},
		{[]string{"export", "t.usage", "-from-ts", "yesterday"}, []string{"-from-ts:", `"yesterday"`}},
		{[]string{"import"}, []string{"import: missing TOPIC"}},
		{[]string{"schema"}, []string{"schema: missing the action"}},
		{[]string{"schema", "register", "t.usage", "-rule", "sideways"}, []string{"-rule:", `"sideways"`}},
		{[]string{"-url", "ftp://hub", "topics"}, []string{"-url:", "http://HOST:PORT"}},
		{[]string{"topics", "-url", "http://"}, []string{"-url:", "no host"}},
	} {
		r := promctl(t, "", tt.args...)
		r.fails(t, 2, tt.want...)
		assert.Empty(t, r.stdout, "%q", tt.args)
	}
}

// Flags may come before or after the positional arguments, and "--" ends
// them.
func TestFlagsAnywhere(t *testing.T) {
	t.Parallel()
	promctl(t, "", "publish", "-key", "k", "t.anywhere", `{"n":1}`).ok(t)
	promctl(t, "", "publish", "t.anywhere", `{"n":2}`, "-key", "k").ok(t)
	promctl(t, "", "publish", "-key", "k", "t.anywhere", "--", "-3").ok(t)
	recs := exported(t, hubs.open.url, "t.anywhere")
	if assert.Len(t, recs, 3) {
		for _, r := range recs {
			assert.Equal(t, "k", r.Key)
		}
		assert.JSONEq(t, "-3", string(recs[2].Payload))
	}
}

// A hub that cannot be reached is an error of one line that says so.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	promctlAt(t, "http://127.0.0.1:1", "", "topics").fails(t, 1, "topics: cannot reach the hub at http://127.0.0.1:1")
	promctlAt(t, "http://127.0.0.1:1", "", "tail", "t.unreachable").fails(t, 1, "tail:")
}
