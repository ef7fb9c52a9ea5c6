package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
)

// Signature algorithms a key can be pinned to. "none" is not one of them
// and is refused whatever the configuration.
const (
	HS256 = "HS256"
	HS384 = "HS384"
	HS512 = "HS512"
	RS256 = "RS256"
	RS384 = "RS384"
	RS512 = "RS512"
	PS256 = "PS256"
	PS384 = "PS384"
	PS512 = "PS512"
	ES256 = "ES256"
	ES384 = "ES384"
	ES512 = "ES512"
	EdDSA = "EdDSA"
)

// minRSABits is the smallest RSA modulus accepted, in static keys and in a
// JWKS alike.
const minRSABits = 2048

// hmacMinBytes is the shortest secret per HMAC algorithm: RFC 7518 §3.2
// asks for a key at least as long as the hash output.
var hmacMinBytes = map[string]int{HS256: 32, HS384: 48, HS512: 64}

var (
	rsaAlgs = []string{RS256, RS384, RS512, PS256, PS384, PS512}
	// asymmetricAlgs is what a JWKS key may be used with (by its type).
	asymmetricAlgs = []string{RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA}
)

// knownAlg reports whether alg is one of the algorithms above.
func knownAlg(alg string) bool {
	_, hs := hmacMinBytes[alg]
	return hs || slices.Contains(asymmetricAlgs, alg)
}

// verifyKey is a key ready for verification, with the algorithms it is
// pinned to: exactly one for a configured key, those its type allows (or
// its "alg") for a JWKS key.
type verifyKey struct {
	id     string
	algs   []string
	key    any // []byte, *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	source string
}

func (k *verifyKey) allows(alg string) bool { return slices.Contains(k.algs, alg) }

func (k *verifyKey) describe() string {
	if k.id == "" {
		return fmt.Sprintf("%s key without kid (%s)", k.source, strings.Join(k.algs, ", "))
	}
	return fmt.Sprintf("%s key %q (%s)", k.source, k.id, strings.Join(k.algs, ", "))
}

// algsForKey returns the asymmetric algorithms a public key can verify, or
// an error for a key of the wrong kind or too weak.
func algsForKey(key any) ([]string, error) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return nil, fmt.Errorf("nil RSA key")
		}
		if bits := k.N.BitLen(); bits < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits, fewer than %d", bits, minRSABits)
		}
		return rsaAlgs, nil
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return nil, fmt.Errorf("nil ECDSA key")
		}
		switch k.Curve {
		case elliptic.P256():
			return []string{ES256}, nil
		case elliptic.P384():
			return []string{ES384}, nil
		case elliptic.P521():
			return []string{ES512}, nil
		}
		return nil, fmt.Errorf("ECDSA curve %s is not P-256, P-384 or P-521", k.Curve.Params().Name)
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("Ed25519 key of %d bytes, want %d", len(k), ed25519.PublicKeySize)
		}
		return []string{EdDSA}, nil
	case []byte, string:
		return nil, fmt.Errorf("%T is a secret, not a public key; HMAC secrets go in Config.Secrets", key)
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return nil, fmt.Errorf("%T is a private key; give its public key", key)
	case nil:
		return nil, fmt.Errorf("no key")
	}
	return nil, fmt.Errorf("%T is not an RSA, ECDSA or Ed25519 public key", key)
}

// ParsePublicKeyPEM parses a PEM "PUBLIC KEY" (PKIX), "RSA PUBLIC KEY"
// (PKCS #1) or "CERTIFICATE" block into a public key for [PublicKey].
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, invalid("public key", "no PEM block found")
	}
	switch block.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: public key: %w", ErrInvalid, err)
		}
		return k, nil
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: public key: %w", ErrInvalid, err)
		}
		return k, nil
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: public key: %w", ErrInvalid, err)
		}
		return c.PublicKey, nil
	}
	return nil, invalid("public key", "PEM block %q is not a PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", block.Type)
}
