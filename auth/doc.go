// Package auth verifies JSON Web Tokens (on github.com/lestrrat-go/jwx/v2)
// and turns their claims into a [Principal] whose [acl.Policy] decides what
// it may publish, subscribe to and replay. It serves the gateway's AUTH
// frame and the HTTP endpoints alike ([Verifier.Verify], [Middleware]).
//
// # Keys
//
// A [Verifier] takes keys from three sources, which may be combined
// ([Config]): HMAC secrets ([Secret]), static public keys ([PublicKey]:
// RSA, ECDSA, Ed25519) and a JWKS URL ([JWKSConfig]). Every key is pinned
// to its algorithms: one for a configured key (HS256 by default for a
// secret, by key type for a public key), those of its type (or its own
// "alg") for a fetched key. A token is checked only against keys pinned to
// the alg its header names, so "none" is never accepted and an HS256 token
// cannot be verified with an RSA public key used as an HMAC secret (the
// classic algorithm confusion). Symmetric keys are never taken from a key
// set, and header fields that point at keys (jku, x5u, jwk) are ignored.
//
// A token with a kid is checked against the keys with that ID only; a
// token without one against every key of its algorithm. Give a key an ID
// when the issuer puts a kid in its tokens.
//
// # Key sets
//
// With a JWKS URL, one goroutine fetches the set at start and every
// RefreshInterval, and when a token names a kid that no key has, at most
// once per MinRefetchInterval however many such tokens arrive (a flood of
// made-up kids costs the issuer one request per interval). A rotated key is
// thus picked up by the first token that uses it, or by the next refresh.
// A failed fetch keeps the keys fetched before. Close stops the goroutine
// and waits for it.
//
// # Checks
//
// Verify refuses, in this order: a token over MaxTokenSize (8 KiB by
// default) before parsing anything; anything but three base64url parts
// separated by two dots; a header without a supported alg, or with crit or
// b64; an unknown kid; an alg the key is not pinned to; a bad signature;
// claims that are not a JSON object; a missing or past exp (with Leeway);
// a future nbf (with Leeway); an iss or aud not configured, when
// configured. iat is not checked.
//
// # Principals and policies
//
// The [Principal] holds the subject, the expiry, every claim and a policy:
// the "policy" claim if present (the JSON of [acl.ParsePolicy], or a string
// holding it), else one allow rule per ACL scope found in the "scopes" and
// "scope" claims (an array of strings or a space-separated string, as
// OAuth's scope; "openid" and other scopes that are not "<action>:<pattern>"
// are kept in Principal.Scopes and grant nothing), else
// Config.DefaultScopes. A token with none of them may do nothing.
//
// # Errors
//
// Every rejection of a token is a [*TokenError]: errors.Is matches
// [ErrInvalidToken] and one reason: [ErrTokenExpired] (the gateway answers
// token_expired, and the client can refresh), [ErrTooLarge],
// [ErrMalformed], [ErrAlgorithm], [ErrUnknownKey], [ErrSignature],
// [ErrMissingClaim], [ErrNotYetValid], [ErrAudience], [ErrIssuer] or
// [ErrPolicy]. The message names the reason and never holds the token or
// key material, so it may be sent to the client. [ErrKeysUnavailable] means
// the key set could not be fetched, which is not the token's fault.
//
// # HTTP
//
// [BearerToken] reads "Authorization: Bearer", [Middleware] verifies it
// and puts the principal in the request's context, [Authorize] checks an
// action against it, and [WriteError] answers 401, 403 (or 400, 503) with
// {"error":{"code":"...","msg":"..."}}, codes as in the gateway's protocol
// (unauthorized, auth_failed, token_expired, forbidden).
package auth
