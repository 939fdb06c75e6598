package iothub

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SAS tokens (shared access signatures), IoT Hub's bearer credential:
//
//	SharedAccessSignature sr=<resource>&sig=<signature>&se=<expiry>[&skn=<key name>]
//
// in any field order. sr is the URL-encoded resource the token grants
// (a hub host name, "<host>/devices/<id>", "<host>/devices/<id>/modules/<mid>"),
// se the expiry in Unix seconds, skn the shared access policy whose key
// signed it (absent for an identity's own key), and sig the URL-encoded
// base64 of HMAC-SHA256(key, sr + "\n" + se), computed over sr and se
// exactly as they appear in the token: SDKs escape sr in different ways,
// and the signature covers their bytes, not a normalized form.

// tokenPrefix starts every SAS token.
const tokenPrefix = "SharedAccessSignature "

// maxTokenLen bounds the token a peer may make us parse.
const maxTokenLen = 4096

// Token is a parsed SAS token.
type Token struct {
	// RawResource and RawExpiry are sr and se as they appear in the token
	// (the signed bytes).
	RawResource string
	RawExpiry   string
	// Resource is sr URL-decoded.
	Resource string
	// Expiry is se.
	Expiry time.Time
	// KeyName is skn URL-decoded ("" when absent).
	KeyName   string
	signature []byte
}

// ParseToken parses a SAS token. Fields other than sr, sig, se and skn
// are refused, as are duplicates and a missing sr, sig or se.
func ParseToken(s string) (*Token, error) {
	if len(s) > maxTokenLen {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrBadToken, len(s), maxTokenLen)
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: does not start with %q", ErrBadToken, strings.TrimSpace(tokenPrefix))
	}
	t := &Token{}
	var sig string
	seen := map[string]bool{}
	for field := range strings.SplitSeq(rest, "&") {
		k, v, ok := strings.Cut(field, "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: field %q is not key=value", ErrBadToken, truncate(field, 32))
		}
		if seen[k] {
			return nil, fmt.Errorf("%w: field %s given twice", ErrBadToken, k)
		}
		seen[k] = true
		switch k {
		case "sr":
			t.RawResource = v
		case "sig":
			sig = v
		case "se":
			t.RawExpiry = v
		case "skn":
			name, err := url.PathUnescape(v)
			if err != nil {
				return nil, fmt.Errorf("%w: skn: %w", ErrBadToken, err)
			}
			t.KeyName = name
		default:
			return nil, fmt.Errorf("%w: unknown field %q", ErrBadToken, truncate(k, 32))
		}
	}
	if t.RawResource == "" || sig == "" || t.RawExpiry == "" {
		return nil, fmt.Errorf("%w: sr, sig and se are required", ErrBadToken)
	}
	var err error
	if t.Resource, err = url.PathUnescape(t.RawResource); err != nil {
		return nil, fmt.Errorf("%w: sr: %w", ErrBadToken, err)
	}
	se, err := strconv.ParseInt(t.RawExpiry, 10, 64)
	if err != nil || se <= 0 || t.RawExpiry[0] == '+' {
		return nil, fmt.Errorf("%w: se %q is not a Unix time in seconds", ErrBadToken, truncate(t.RawExpiry, 32))
	}
	t.Expiry = time.Unix(se, 0)
	// '+' in a base64 signature is kept as it is (PathUnescape leaves it).
	rawSig, err := url.PathUnescape(sig)
	if err == nil {
		t.signature, err = base64.StdEncoding.DecodeString(rawSig)
	}
	if err != nil || len(t.signature) != sha256.Size {
		return nil, fmt.Errorf("%w: sig is not a base64 HMAC-SHA256", ErrBadToken)
	}
	return t, nil
}

// Verify checks the token's signature with key (the decoded key bytes)
// and that it has not expired at now.
func (t *Token) Verify(key []byte, now time.Time) error {
	if !now.Before(t.Expiry) {
		return fmt.Errorf("%w: expired at %s", ErrTokenExpired, t.Expiry.UTC().Format(time.RFC3339))
	}
	if !hmac.Equal(sign(key, t.RawResource, t.RawExpiry), t.signature) {
		return ErrBadSignature
	}
	return nil
}

// VerifyBase64 is Verify with a base64 key as identities and policies
// keep them; a key that does not decode never matches.
func (t *Token) VerifyBase64(key string, now time.Time) error {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) == 0 {
		return fmt.Errorf("%w: the key is not base64", ErrBadSignature)
	}
	return t.Verify(k, now)
}

// Grants reports whether the token's resource covers the resource
// host+path ("/devices/d1"): the same resource or one of its parents, at a
// path boundary. Host and path are compared without regard to case (some
// SDKs lower-case sr), and an "https://" or "http://" prefix of sr is
// ignored.
func (t *Token) Grants(host, path string) bool {
	sr := strings.ToLower(t.Resource)
	for _, scheme := range []string{"https://", "http://"} {
		sr = strings.TrimPrefix(sr, scheme)
	}
	sr = strings.TrimSuffix(sr, "/")
	target := strings.ToLower(host + path)
	return sr != "" && (target == sr || strings.HasPrefix(target, sr+"/"))
}

func sign(key []byte, sr, se string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(sr))
	mac.Write([]byte{'\n'})
	mac.Write([]byte(se))
	return mac.Sum(nil)
}

// SignToken makes a SAS token for resource (unescaped: "hub.example/devices/d1")
// with a base64 key, as the Node SDKs do: sr is encodeURIComponent of the
// resource. keyName is the policy name ("" for an identity's own key).
func SignToken(resource, keyName, key string, expiry time.Time) (string, error) {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return "", fmt.Errorf("iothub: key: %w", err)
	}
	sr := EncodeComponent(resource)
	se := strconv.FormatInt(expiry.Unix(), 10)
	tok := tokenPrefix + "sr=" + sr + "&sig=" + EncodeComponent(base64.StdEncoding.EncodeToString(sign(k, sr, se))) + "&se=" + se
	if keyName != "" {
		tok += "&skn=" + EncodeComponent(keyName)
	}
	return tok, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
