package auth_test

import (
	"context"
	"testing"

	"github.com/promethean/promlib/auth"
)

func BenchmarkVerify(b *testing.B) {
	v, err := auth.NewJWTVerifier(staticConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	cl := claims(map[string]any{"scopes": []string{"publish:heartbeat.*", "subscribe:process.**"}})
	for _, bc := range []struct {
		name, alg, kid string
		key            any
	}{
		{"HS256", "HS256", "hs", hmacSecret},
		{"RS256", "RS256", "rsa", rsaKey()},
		{"ES256", "ES256", "ec", ecKey()},
		{"EdDSA", "EdDSA", "ed", edKey()},
	} {
		tok := sign(b, bc.alg, bc.key, bc.kid, cl)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
