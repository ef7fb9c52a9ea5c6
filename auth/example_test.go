package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
)

// issue mints a token the way an identity provider would.
func issue(secret []byte, scopes []string, exp time.Time) string {
	tok, err := jwt.NewBuilder().
		Subject("svc-a").
		Audience([]string{"promlib"}).
		Expiration(exp).
		Claim("scope", scopes).
		Build()
	if err != nil {
		panic(err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256, secret))
	if err != nil {
		panic(err)
	}
	return string(signed)
}

func ExampleVerifier_Verify() {
	secret := []byte("an example secret of 32 bytes!!!")
	v, err := auth.NewJWTVerifier(auth.Config{
		Secrets:   []auth.Secret{{Key: secret}},
		Audiences: []string{"promlib"},
		Leeway:    5 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer v.Close()

	token := issue(secret, []string{"publish:heartbeat.*", "subscribe:process.**"}, time.Now().Add(time.Hour))
	p, err := v.Verify(context.Background(), token)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Subject)
	fmt.Println(p.Check(acl.Publish, "heartbeat.svc-a", ""))
	fmt.Println(p.Check(acl.Publish, "process.svc-a", ""))

	_, err = v.Verify(context.Background(), issue(secret, nil, time.Now().Add(-time.Minute)))
	fmt.Println(errors.Is(err, auth.ErrTokenExpired))
	// Output:
	// svc-a
	// <nil>
	// acl: forbidden: publish "process.svc-a": no rule allows it
	// true
}

func ExampleMiddleware() {
	secret := []byte("an example secret of 32 bytes!!!")
	v, err := auth.NewJWTVerifier(auth.Config{Secrets: []auth.Secret{{Key: secret}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer v.Close()

	publish := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Authorize(r.Context(), acl.Publish, r.URL.Query().Get("topic"), ""); err != nil {
			auth.WriteError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h := auth.Middleware(v)(publish)

	token := issue(secret, []string{"publish:a.*"}, time.Now().Add(time.Hour))
	for _, c := range []struct{ header, topic string }{
		{"Bearer " + token, "a.b"},
		{"Bearer " + token, "b.c"},
		{"", "a.b"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/publish?topic="+c.topic, nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Body.Len() == 0 {
			fmt.Println(w.Code)
			continue
		}
		fmt.Print(w.Code, " ", w.Body.String()) // the body ends with a newline
	}
	// Output:
	// 204
	// 403 {"error":{"code":"forbidden","msg":"acl: forbidden: publish \"b.c\": no rule allows it"}}
	// 401 {"error":{"code":"unauthorized","msg":"auth: no bearer token: no Authorization header"}}
}

// A shared secret is a Verifier too: its principal may do everything.
func ExampleStaticTokens() {
	v := auth.StaticTokens("s3cret")
	p, err := v.Verify(context.Background(), "s3cret")
	fmt.Println(p.Subject, err, p.Check(acl.Admin, "orders", ""))
	_, err = v.Verify(context.Background(), "guess")
	fmt.Println(err, errors.Is(err, auth.ErrInvalidToken))
	// Output:
	// static <nil> <nil>
	// auth: unknown token true
}
