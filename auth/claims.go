package auth

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/promethean/promlib/acl"
)

// maxNumericDate bounds exp and nbf (year 9999) so that conversion to
// time.Time cannot overflow.
const maxNumericDate = 253402300799

// principal checks the claims of a verified payload and builds the principal.
func (v *JWTVerifier) principal(payload []byte) (*Principal, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil || raw == nil {
		return nil, tokenErr(ErrMalformed, err, "claims are not a JSON object")
	}
	now := v.now()
	leeway := v.cfg.Leeway

	exp, ok, err := numericDate(raw, "exp")
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, tokenErr(ErrMissingClaim, nil, "exp is required")
	case !now.Before(exp.Add(leeway)):
		return nil, tokenErr(ErrTokenExpired, nil, "expired at %s, %s ago (leeway %s)",
			exp.UTC().Format(time.RFC3339), now.Sub(exp).Round(time.Second), leeway)
	}
	nbf, ok, err := numericDate(raw, "nbf")
	switch {
	case err != nil:
		return nil, err
	case ok && now.Add(leeway).Before(nbf):
		return nil, tokenErr(ErrNotYetValid, nil, "nbf is %s, %s from now (leeway %s)",
			nbf.UTC().Format(time.RFC3339), nbf.Sub(now).Round(time.Second), leeway)
	}
	if len(v.cfg.Issuers) > 0 {
		iss, ok, err := stringClaim(raw, "iss")
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, tokenErr(ErrMissingClaim, nil, "iss is required")
		case !slices.Contains(v.cfg.Issuers, iss):
			return nil, tokenErr(ErrIssuer, nil, "iss %q is not accepted", clip(iss))
		}
	}
	if len(v.cfg.Audiences) > 0 {
		aud, ok, err := stringsClaim(raw, "aud", false)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			return nil, tokenErr(ErrMissingClaim, nil, "aud is required")
		case !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.cfg.Audiences, a) }):
			return nil, tokenErr(ErrAudience, nil, "aud %q names no accepted audience", clip(strings.Join(aud, ",")))
		}
	}
	sub, _, err := stringClaim(raw, "sub")
	if err != nil {
		return nil, err
	}
	p := &Principal{Subject: sub, Expiry: exp.Add(leeway)}
	for _, name := range []string{"scopes", "scope"} {
		s, _, err := stringsClaim(raw, name, true)
		if err != nil {
			return nil, err
		}
		p.Scopes = append(p.Scopes, s...)
	}
	if p.Policy, err = v.policy(raw, p.Scopes); err != nil {
		return nil, err
	}
	p.Claims = make(map[string]any, len(raw))
	for k, m := range raw {
		var val any
		if err := json.Unmarshal(m, &val); err != nil {
			return nil, tokenErr(ErrMalformed, err, "claim %q", clip(k))
		}
		p.Claims[k] = val
	}
	return p, nil
}

// policy builds the principal's policy: the policy claim (a JSON object, or
// a string holding one) wins; else the ACL scopes; else the defaults.
func (v *JWTVerifier) policy(raw map[string]json.RawMessage, scopes []string) (*acl.Policy, error) {
	if m, ok := raw["policy"]; ok && !isNull(m) {
		doc := []byte(m)
		var s string
		if json.Unmarshal(m, &s) == nil {
			doc = []byte(s)
		}
		p, err := acl.ParsePolicy(doc)
		if err != nil {
			return nil, tokenErr(ErrPolicy, err, "policy claim")
		}
		return p, nil
	}
	aclScopes := slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return !acl.IsScope(s) })
	if len(aclScopes) == 0 {
		return v.defaults, nil
	}
	p, err := acl.FromScopes(aclScopes)
	if err != nil {
		return nil, tokenErr(ErrPolicy, err, "scopes")
	}
	return p, nil
}

func isNull(m json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(m), []byte("null")) }

// numericDate reads a NumericDate claim (seconds since the epoch, possibly
// fractional).
func numericDate(raw map[string]json.RawMessage, name string) (time.Time, bool, error) {
	m, ok := raw[name]
	if !ok || isNull(m) {
		return time.Time{}, false, nil
	}
	var f float64
	if err := json.Unmarshal(m, &f); err != nil {
		return time.Time{}, false, tokenErr(ErrMalformed, nil, "%s is not a number", name)
	}
	if math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, tokenErr(ErrMalformed, nil, "%s %v is out of range", name, f)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

func stringClaim(raw map[string]json.RawMessage, name string) (string, bool, error) {
	m, ok := raw[name]
	if !ok || isNull(m) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(m, &s); err != nil {
		return "", false, tokenErr(ErrMalformed, nil, "%s is not a string", name)
	}
	return s, true, nil
}

// stringsClaim reads a claim that is a string or an array of strings (aud;
// scope and scopes, whose string form is space-separated when split).
func stringsClaim(raw map[string]json.RawMessage, name string, split bool) ([]string, bool, error) {
	m, ok := raw[name]
	if !ok || isNull(m) {
		return nil, false, nil
	}
	var s string
	if err := json.Unmarshal(m, &s); err == nil {
		if split {
			return strings.Fields(s), true, nil
		}
		return []string{s}, true, nil
	}
	var list []string
	if err := json.Unmarshal(m, &list); err != nil {
		return nil, false, tokenErr(ErrMalformed, nil, "%s is not a string or an array of strings", name)
	}
	return list, true, nil
}
