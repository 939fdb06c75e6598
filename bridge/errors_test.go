package bridge

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// A failed store's error quotes at most whatMax bytes of its topic, cut
// between characters, so the cause fits the publisher's reason string.
func TestBridgeStoreFailedQuotesTheTopicShort(t *testing.T) {
	cause := errors.New("store: message too large")
	err := storeFailed("a"+strings.Repeat("é", 100), cause)
	s := err.Error()
	if !errors.Is(err, cause) || !utf8.ValidString(s) || !strings.HasSuffix(s, "...: store: message too large") ||
		len(s) > len("bridge: store ")+whatMax+len("...: store: message too large") {
		t.Fatalf("error %q", s)
	}
	if s := storeFailed("a/b", cause).Error(); s != "bridge: store a/b: store: message too large" {
		t.Fatalf("short topic: %q", s)
	}
}
