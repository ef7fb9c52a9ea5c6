package acl_test

import (
	"errors"
	"fmt"

	"github.com/promethean/promlib/acl"
)

func ExampleFromScopes() {
	p, err := acl.FromScopes([]string{"publish:heartbeat.*", "subscribe:process.**"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Check(acl.Publish, "heartbeat.svc-a", ""))
	fmt.Println(p.Check(acl.Subscribe, "process.svc-a.state", "ui"))
	err = p.Check(acl.Publish, "process.svc-a", "")
	fmt.Println(errors.Is(err, acl.ErrForbidden), err)
	// Output:
	// <nil>
	// <nil>
	// true acl: forbidden: publish "process.svc-a": no rule allows it
}

func ExampleParsePolicy() {
	p, err := acl.ParsePolicy([]byte(`{"rules":[
		{"effect":"allow","action":"*","topics":["orders.**"]},
		{"effect":"deny","action":"publish","topics":["orders.*.audit"]}
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Allowed(acl.Publish, "orders.eu.created", ""))
	fmt.Println(p.Allowed(acl.Publish, "orders.eu.audit", ""))
	fmt.Println(p.Allowed(acl.Replay, "orders.eu.audit", ""))
	// Output:
	// true
	// false
	// true
}

func ExampleCompilePattern() {
	p, err := acl.CompilePattern("**.a.*.z")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, topic := range []string{"a.b.z", "x.y.a.b.z", "a.z", "a.b.c.z"} {
		fmt.Println(topic, p.Match(topic))
	}
	_, err = acl.CompilePattern("orders.eu*")
	fmt.Println(err)
	// Output:
	// a.b.z true
	// x.y.a.b.z true
	// a.z false
	// a.b.c.z false
	// acl: invalid: pattern: "orders.eu*": segment "eu*": '*' and '**' must be whole segments
}
