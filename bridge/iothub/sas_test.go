package iothub

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// The key and tokens below were made by azure-iot-common 1.13.3's
// SharedAccessSignature.create (the Node SDKs' signer): a device token and
// a policy token expiring at 2030-01-01T00:00:00Z.
const (
	pinnedKey         = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	pinnedDeviceToken = "SharedAccessSignature sr=hub.example.test%2Fdevices%2Fdev-1&sig=83o2pgLPjfJrMfJIRUhra3DWd%2BXtLHkYBJK3ClQCU08%3D&se=1893456000"
	pinnedPolicyToken = "SharedAccessSignature sr=hub.example.test&sig=6XUZuJeFXZZ77176%2FUNRwItXICLJvjye2GVuoSl9i8U%3D&skn=iothubowner&se=1893456000"
)

var beforePinnedExpiry = time.Date(2029, 12, 31, 0, 0, 0, 0, time.UTC)

func TestHubSASPinnedNodeTokens(t *testing.T) {
	tok, err := ParseToken(pinnedDeviceToken)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Resource != "hub.example.test/devices/dev-1" || tok.RawResource != "hub.example.test%2Fdevices%2Fdev-1" ||
		tok.KeyName != "" || tok.Expiry.Unix() != 1893456000 {
		t.Fatalf("parsed %+v", tok)
	}
	if err := tok.VerifyBase64(pinnedKey, beforePinnedExpiry); err != nil {
		t.Fatalf("Node's device token refused: %v", err)
	}
	if !tok.Grants("hub.example.test", "/devices/dev-1") || !tok.Grants("HUB.example.test", "/devices/dev-1/modules/m") ||
		tok.Grants("hub.example.test", "/devices/dev-10") || tok.Grants("other.test", "/devices/dev-1") {
		t.Fatal("resource scope")
	}
	ptok, err := ParseToken(pinnedPolicyToken)
	if err != nil {
		t.Fatal(err)
	}
	if ptok.KeyName != "iothubowner" || ptok.VerifyBase64(pinnedKey, beforePinnedExpiry) != nil ||
		!ptok.Grants("hub.example.test", "") || !ptok.Grants("hub.example.test", "/devices/x") {
		t.Fatalf("policy token %+v", ptok)
	}
	// SignToken makes the same bytes as the Node SDK.
	got, err := SignToken("hub.example.test/devices/dev-1", "", pinnedKey, time.Unix(1893456000, 0))
	if err != nil || got != pinnedDeviceToken {
		t.Fatalf("SignToken = %q, %v", got, err)
	}
}

// TestHubSASSignedOverRawResource: the signature covers sr as the token
// carries it; an SDK that escapes differently (lower-case hex, here) is
// accepted, and re-escaping would have broken it.
func TestHubSASSignedOverRawResource(t *testing.T) {
	key, _ := base64.StdEncoding.DecodeString(pinnedKey)
	sr := "hub.example.test%2fdevices%2fdev-1"
	sig := base64.StdEncoding.EncodeToString(sign(key, sr, "1893456000"))
	raw := "SharedAccessSignature sig=" + EncodeComponent(sig) + "&se=1893456000&sr=" + sr
	tok, err := ParseToken(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.Verify(key, beforePinnedExpiry); err != nil {
		t.Fatalf("lower-case escaping refused: %v", err)
	}
	if !tok.Grants("hub.example.test", "/devices/dev-1") {
		t.Fatal("scope")
	}
}

func TestHubSASRefusals(t *testing.T) {
	tok, err := ParseToken(pinnedDeviceToken)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.VerifyBase64(pinnedKey, time.Unix(1893456000, 0)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("at expiry: %v", err)
	}
	other := base64.StdEncoding.EncodeToString([]byte("another key of 32 bytes.........."))
	if err := tok.VerifyBase64(other, beforePinnedExpiry); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key: %v", err)
	}
	tampered := strings.Replace(pinnedDeviceToken, "dev-1", "dev-2", 1)
	tt, err := ParseToken(tampered)
	if err != nil {
		t.Fatal(err)
	}
	if err := tt.VerifyBase64(pinnedKey, beforePinnedExpiry); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("resource changed: %v", err)
	}
	for _, bad := range []string{
		"",
		"sr=a&sig=b&se=1",
		"SharedAccessSignature sr=a&se=1",
		"SharedAccessSignature sr=a&sig=AAAA&se=1",
		"SharedAccessSignature sr=a&sig=" + strings.Repeat("A", 43) + "=&se=x",
		"SharedAccessSignature sr=a&sig=" + strings.Repeat("A", 43) + "=&se=1&se=2",
		"SharedAccessSignature sr=a&sig=" + strings.Repeat("A", 43) + "=&se=1&foo=bar",
		"SharedAccessSignature sr=%zz&sig=" + strings.Repeat("A", 43) + "=&se=1",
		"SharedAccessSignature sr=a&sig=" + strings.Repeat("A", 43) + "=&se=-5",
		"SharedAccessSignature " + strings.Repeat("x", maxTokenLen),
	} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("%q: %v", truncate(bad, 60), err)
		}
	}
}

func FuzzHubParseToken(f *testing.F) {
	f.Add(pinnedDeviceToken)
	f.Add(pinnedPolicyToken)
	f.Add("SharedAccessSignature sr=&sig=&se=")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("error not ErrBadToken: %v", err)
			}
			return
		}
		_ = tok.VerifyBase64(pinnedKey, beforePinnedExpiry)
		_ = tok.Grants("hub.example.test", "/devices/x")
	})
}
