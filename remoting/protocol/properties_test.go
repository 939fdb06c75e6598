package protocol

import (
	"errors"
	"reflect"
	"testing"
)

func TestRemotingPropertiesText(t *testing.T) {
	m := map[string]string{"brokerPermission": "6", "autoCreateTopicEnable": "true", "brokerIP1": ""}
	if got := string(EncodeProperties(m)); got != "autoCreateTopicEnable=true\nbrokerIP1=\nbrokerPermission=6\n" {
		t.Fatalf("encoded %q", got)
	}
	back, err := DecodeProperties(EncodeProperties(m))
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip %v %v", back, err)
	}
	// As mqadmin writes a single update, and hand-written forms.
	in := "#comment\r\n! other\n\n  a = 1 \r\nb:two words\nc 3\nflag\nurl=http://x:1/y=z\na=override\n"
	want := map[string]string{"a": "override", "b": "two words", "c": "3", "flag": "", "url": "http://x:1/y=z"}
	if got, err := DecodeProperties([]byte(in)); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %v %v", got, err)
	}
	for _, bad := range []string{"=value\n", " : x", "\xff=1"} {
		if _, err := DecodeProperties([]byte(bad)); !errors.Is(err, ErrBadBody) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzDecodeProperties(f *testing.F) {
	f.Add([]byte("a=1\nb:2\n#c\n"))
	f.Add([]byte("brokerPermission=6\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeProperties(b)
		if err != nil {
			return
		}
		// What decodes and has no line breaks or separators inside its
		// keys and values survives a round trip.
		back, err := DecodeProperties(EncodeProperties(m))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(back) > len(m) {
			t.Fatalf("round trip grew %v -> %v", m, back)
		}
	})
}
