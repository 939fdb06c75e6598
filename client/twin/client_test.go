package twin

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestTwinClientOptions(t *testing.T) {
	if err := (&Options{}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty options: %v", err)
	}
	if err := (&Options{Registries: []string{"x"}, WatchCheck: -1}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("negative option: %v", err)
	}
}

// The continuation token format of query.go, pinned.
func TestTwinContinuationPinned(t *testing.T) {
	tok := encodeContinuation(8, 3, "dev-42")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(raw), "01"+"08"+"03"+"06"+hex.EncodeToString([]byte("dev-42")); got != want {
		t.Fatalf("token bytes %s, want %s", got, want)
	}
	if tok != "AQgDBmRldi00Mg" {
		t.Fatalf("token %q", tok)
	}
	shard, after, err := decodeContinuation(tok, 8)
	if err != nil || shard != 3 || after != "dev-42" {
		t.Fatalf("decode: %d %q %v", shard, after, err)
	}
	for _, bad := range []string{"", "!!", "AQ", encodeContinuation(4, 3, "x"), encodeContinuation(8, 8, ""), tok + "A",
		base64.RawURLEncoding.EncodeToString([]byte{2, 8, 3, 0})} {
		if _, _, err := decodeContinuation(bad, 8); !errors.Is(err, ErrBadContinuation) {
			t.Errorf("token %q: %v", bad, err)
		}
	}
	// Format 2, of SELECT TOP n: LEFT (5) after the position.
	top := topContinuation(tok, 5)
	if raw, _ := base64.RawURLEncoding.DecodeString(top); hex.EncodeToString(raw) != "02"+"08"+"03"+"06"+hex.EncodeToString([]byte("dev-42"))+"05" {
		t.Fatalf("TOP token bytes %x", raw)
	}
	if pos, left, err := splitTopContinuation(top, 10); err != nil || pos != tok || left != 5 {
		t.Fatalf("TOP token: %q %d %v", pos, left, err)
	}
	for _, bad := range []string{tok, top + "A", topContinuation(tok, 0), topContinuation(tok, 11), topContinuation(encodeContinuation(8, 8, ""), 1)} {
		if _, _, err := splitTopContinuation(bad, 10); !errors.Is(err, ErrBadContinuation) {
			t.Errorf("TOP token %q: %v", bad, err)
		}
	}
	if _, _, err := decodeContinuation(top, 8); !errors.Is(err, ErrBadContinuation) {
		t.Errorf("a TOP token read as a plain one: %v", err)
	}
}

// TestContinuationErrorQuotesLittle: a bad token's error (which a 400
// carries back) quotes at most maxQuotedToken bytes of it.
func TestContinuationErrorQuotesLittle(t *testing.T) {
	long := strings.Repeat("Z", 100_000)
	for name, err := range map[string]error{
		"plain": func() error { _, _, err := decodeContinuation(long, 8); return err }(),
		"top":   func() error { _, _, err := splitTopContinuation(long, 10); return err }(),
	} {
		if !errors.Is(err, ErrBadContinuation) {
			t.Fatalf("%s: %v", name, err)
		}
		if n := len(err.Error()); n > 200 {
			t.Fatalf("%s: error of %d bytes: %.120s", name, n, err)
		}
		if !strings.Contains(err.Error(), "(100000 bytes)") {
			t.Fatalf("%s: error does not say how long the token was: %v", name, err)
		}
	}
	if _, _, err := decodeContinuation("!!", 8); err == nil || !strings.Contains(err.Error(), `"!!"`) {
		t.Fatalf("a short token is quoted whole: %v", err)
	}
}
