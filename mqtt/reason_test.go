package mqtt

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReasonTextIsAValidString(t *testing.T) {
	long := "a" + strings.Repeat("é", 150) // byte 200 falls inside an é
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"first error\nsecond error", "first error second error"},
		{"tab\there\x00nul\x7fdel\u0085nel", "tab here nul del nel"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"non\uFFFEchar\uFDD0", "non\uFFFDchar\uFFFD"},
		{long, "a" + strings.Repeat("é", 99)},
	} {
		got := reasonText(tc.in)
		if got != tc.want {
			t.Errorf("reasonText(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(got) || len(got) > maxReasonString {
			t.Errorf("reasonText(%q) = %q: not a valid reason string", tc.in, got)
		}
	}
}
