package main

import (
	"strings"
	"testing"
)

// In standalone, a bridge.refresh_age above half of the broker's own
// store.file_reserved_time would copy live retained messages and sessions
// only after retention removed them: it is lowered to that half, and the
// log says so; the defaults (24 h under 72 h) are kept as they are.
func TestStandaloneRefreshAgeUnderRetention(t *testing.T) {
	logs, _ := standalone(t, "-set", "store.file_reserved_time=1h")
	if out := logs.String(); !strings.Contains(out, "bridge.refresh_age lowered") || !strings.Contains(out, "used=30m0s") {
		t.Fatalf("retention 1h: no refresh_age lowered to 30m in the log:\n%s", out)
	}
	logs, _ = standalone(t)
	if out := logs.String(); strings.Contains(out, "refresh_age lowered") {
		t.Fatalf("default retention: refresh_age lowered:\n%s", out)
	}
}
