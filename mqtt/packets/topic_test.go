package packets

import (
	"strings"
	"testing"
)

func TestMQTTTopicValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "a/b": true, "/": true, "//": true, "$SYS/x": true, "a b/ü/日本": true,
		"": false, "a/+": false, "#": false, "a#": false, "a\x00b": false, "\xff": false,
		strings.Repeat("a", 65535): true, strings.Repeat("a", 65536): false,
	} {
		if got := ValidTopicName(s); got != want {
			t.Errorf("ValidTopicName(%.20q) = %v, want %v", s, got, want)
		}
	}
}

func TestMQTTTopicValidFilter(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "#": true, "+": true, "a/#": true, "a/+/b": true, "+/+": true, "/+": true, "+/": true,
		"/": true, "$SYS/#": true, "$share/g/a/#": true, "$share/g/#": true, "$share/g/+/x": true,
		"$share/g//": true, "$shared/x": true, "$share": true,
		"": false, "a/#/b": false, "#/": false, "a#": false, "a/b#": false, "a+": false, "+a/b": false,
		"a/+b": false, "a\x00": false, "\xc3": false,
		"$share/g": false, "$share/g/": false, "$share//a": false, "$share/g+/a": false, "$share/#/a": false,
		"$share/g/a/#/b": false,
	} {
		if got := ValidTopicFilter(s); got != want {
			t.Errorf("ValidTopicFilter(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestMQTTTopicParseShared(t *testing.T) {
	for _, tc := range []struct {
		in, group, filter string
		ok                bool
	}{
		{"$share/g/a/b", "g", "a/b", true},
		{"$share/consumers/#", "consumers", "#", true},
		{"$share/g//", "g", "/", true},
		{"a/b", "", "", false},
		{"$share/g", "", "", false},
		{"$share//a", "", "", false},
		{"$share/g+/a", "", "", false},
		{"$SHARE/g/a", "", "", false},
	} {
		g, f, ok := ParseShared(tc.in)
		if g != tc.group || f != tc.filter || ok != tc.ok {
			t.Errorf("ParseShared(%q) = %q, %q, %v", tc.in, g, f, ok)
		}
	}
	if !IsShared("$share/g/a") || IsShared("$sharex/g/a") {
		t.Error("IsShared")
	}
}

func TestMQTTTopicMatch(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/b", "a/b/c", false},
		{"a/b/c", "a/b", false},
		{"a/+", "a/b", true},
		{"a/+", "a/", true},
		{"a/+", "a", false},
		{"a/+", "a/b/c", false},
		{"+/+", "/finance", true},
		{"/+", "/finance", true},
		{"+", "/finance", false},
		{"+", "a", true},
		{"#", "a/b/c", true},
		{"#", "/", true},
		{"a/#", "a", true},
		{"a/#", "a/", true},
		{"a/#", "a/b/c", true},
		{"a/#", "ab", false},
		{"a/+/c/#", "a/b/c", true},
		{"a/+/c/#", "a/b/d/e", false},
		{"sport/tennis/+", "sport/tennis/player1", true},
		{"sport/tennis/+", "sport/tennis/player1/ranking", false},
		{"sport/#", "sport", true},
		// $-topics are not matched by a leading wildcard
		{"#", "$SYS/broker", false},
		{"+/broker", "$SYS/broker", false},
		{"$SYS/#", "$SYS/broker", true},
		{"$SYS/+", "$SYS/broker", true},
		{"a/#", "a/$x", true},
		{"", "", true},
	} {
		if got := Match(tc.filter, tc.topic); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.filter, tc.topic, got, tc.want)
		}
	}
}

// TestMQTTTopicMatchModel compares Match with a plain split-based model on
// random filters and topics.
func TestMQTTTopicMatchModel(t *testing.T) {
	model := func(filter, topic string) bool {
		if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
			return false
		}
		f, tp := strings.Split(filter, "/"), strings.Split(topic, "/")
		for i, l := range f {
			if l == "#" {
				return true
			}
			if i >= len(tp) || (l != "+" && l != tp[i]) {
				return false
			}
		}
		return len(f) == len(tp)
	}
	g := newGen(7)
	alphabet := []string{"a", "b", "", "$x"}
	for i := 0; i < 20000; i++ {
		var fl, tl []string
		for n := 1 + g.r.IntN(4); n > 0; n-- {
			tl = append(tl, alphabet[g.r.IntN(len(alphabet))])
		}
		for n := 1 + g.r.IntN(4); n > 0; n-- {
			switch g.r.IntN(4) {
			case 0:
				fl = append(fl, "+")
			default:
				fl = append(fl, alphabet[g.r.IntN(len(alphabet))])
			}
		}
		if g.chance(3) {
			fl = append(fl, "#")
		}
		f, tp := strings.Join(fl, "/"), strings.Join(tl, "/")
		if got, want := Match(f, tp), model(f, tp); got != want {
			t.Fatalf("Match(%q, %q) = %v, model %v", f, tp, got, want)
		}
	}
}

func TestMQTTTopicMatchNoAlloc(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Match("a/+/c/#", "a/b/c/d/e") }); n != 0 {
		t.Fatalf("Match allocates %v times", n)
	}
}
