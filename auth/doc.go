// Package auth turns a bearer token into a [Principal]: who it speaks for
// (Subject), until when (Expiry) and what it may do (an [acl.Policy]). One
// [Verifier] interface serves every edge of promlib: the gateway's AUTH
// frame, HTTP publish, replay and ops. Its implementations are
// [JWTVerifier] (HMAC, RSA, ECDSA and Ed25519 JSON Web Tokens, static keys
// and a JWKS URL), [StaticTokens] (shared secrets) and [OpenAccess] (no
// authentication).
//
//	v, err := auth.NewJWTVerifier(auth.Config{Secrets: []auth.Secret{{Key: secret}}, Leeway: 5 * time.Second})
//	if err != nil {
//		return err
//	}
//	defer v.Close()
//	p, err := v.Verify(ctx, token)          // 401 material when err != nil
//	err = p.Check(acl.Publish, "orders", "") // acl.ErrForbidden: 403
//
// Guarantees of [JWTVerifier]:
//
//   - A token over Config.MaxTokenSize (8 KiB) is refused before any
//     parsing; then anything but a compact JWS, a header without a
//     supported alg ("none" never is), with crit or b64.
//   - Every key is pinned to its algorithms (one for a configured key,
//     those of its type or its own "alg" for a fetched one), so an HS256
//     token is never checked with an RSA key used as a secret. A token
//     with a kid is checked only against keys with that ID. Symmetric
//     (oct) keys, keys for encryption and weak keys (RSA under 2048 bits)
//     are never taken from a key set; jku, x5u and jwk headers are ignored.
//   - A JWKS is fetched at start, every RefreshInterval and, when a token
//     names an unknown kid, at most once per MinRefetchInterval however
//     many such tokens arrive; a failed fetch keeps the keys fetched
//     before, and a set over JWKS.MaxBytes is refused before parsing.
//   - exp is required; exp and nbf are judged by Config.Clock with Leeway,
//     and [Principal.Expiry] is exp plus Leeway, the instant from which the
//     token is refused; iss and aud are checked when configured.
//   - Every rejection is a [*TokenError] matching [ErrInvalidToken] and one
//     reason ([ErrTokenExpired], [ErrMalformed], [ErrAlgorithm],
//     [ErrUnknownKey], [ErrSignature], ...); its text never holds the token
//     or key material. [ErrKeysUnavailable] says the keys could not be
//     fetched, which is not the token's fault.
//
// The principal's policy is the token's "policy" claim (the JSON of
// [acl.ParsePolicy]), else its ACL scopes ("publish:orders.*" in the
// "scopes" or "scope" claim), else Config.DefaultScopes.
//
// The signature is checked by jwx ([github.com/lestrrat-go/jwx/v2/jws]) and
// key sets are parsed by it, but jwt.Parse with jwt.WithKeySet and
// jwk.Cache are not used. jwt.Parse reports an unknown kid, an algorithm
// the key is not pinned to and a bad signature as one opaque error, so the
// reasons above could not be told apart. jwk.Cache's Refresh fetches on
// every call (no limit for a flood of unknown kids) and its refresh runs
// on the system clock, not Config.Clock; the size cap and the key
// filtering would need a wrapping HTTP client and a PostFetcher besides.
// The header, claims and cache code here keeps those guarantees.
//
// For HTTP, [BearerToken] reads "Authorization: Bearer"; [Authenticate]
// is the one way to get a request's principal: the one in its context
// already, else the verifier's for its bearer token, returned with the
// request carrying it. [Middleware] does the same for every request of a
// handler, [Authorize] checks an action against the principal in the
// context, and [WriteError] answers 401, 403, 400 or 503 with
// {"error":{"code":"...","msg":"..."}}, codes as in the gateway's protocol.
package auth
