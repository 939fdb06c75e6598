package packets

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// refValidUTF8 is the rule validUTF8 implements, spelled out the plain
// way: valid UTF-8 and no U+0000.
func refValidUTF8(b []byte) bool { return bytes.IndexByte(b, 0) < 0 && utf8.Valid(b) }

// TestValidUTF8EveryPosition puts each kind of byte that ends the ASCII
// fast path (U+0000, a valid multi-byte rune, a stray continuation byte,
// a truncated rune, an encoded surrogate) at every position of strings of
// 0 to 40 bytes, and checks both validUTF8 and validUTF8String against
// the plain rule.
func TestValidUTF8EveryPosition(t *testing.T) {
	inserts := [][]byte{{0}, []byte("é"), []byte("€"), []byte("😀"), {0x80}, {0xC3}, {0xE2, 0x82}, {0xED, 0xA0, 0x80}, {0xFF}, {0x7F}, {0x01}}
	for n := 0; n <= 40; n++ {
		base := []byte(strings.Repeat("abcdefgh/", 5)[:n])
		check := func(b []byte) {
			t.Helper()
			want := refValidUTF8(b)
			if got := validUTF8(b); got != want {
				t.Fatalf("validUTF8(%q) = %v, want %v", b, got, want)
			}
			if got := validUTF8String(string(b)); got != want {
				t.Fatalf("validUTF8String(%q) = %v, want %v", b, got, want)
			}
		}
		check(base)
		for pos := 0; pos <= n; pos++ {
			for _, ins := range inserts {
				b := append(append(append([]byte{}, base[:pos]...), ins...), base[pos:]...)
				check(b)
			}
		}
	}
}

// FuzzValidUTF8 checks validUTF8 and validUTF8String against the plain
// rule on any bytes.
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{"", "a", "topic/with/levels", "ascii then é", "\x00", "0123456\x00", "01234567\xff", "\xed\xa0\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := refValidUTF8(b)
		if got := validUTF8(b); got != want {
			t.Fatalf("validUTF8(%q) = %v, want %v", b, got, want)
		}
		if got := validUTF8String(string(b)); got != want {
			t.Fatalf("validUTF8String(%q) = %v, want %v", b, got, want)
		}
	})
}

// BenchmarkMQTTPacketsValidUTF8 checks the strings of a state store
// request (its topic, response topic and user properties' keys and
// values) with validUTF8 ("ours") and with the plain rule ("scans").
func BenchmarkMQTTPacketsValidUTF8(b *testing.B) {
	strs := [][]byte{
		[]byte("statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke"),
		[]byte("clients/azure-cpu-0-17/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response"),
		[]byte("__ts"), []byte("0001764221811000:00000:azure-cpu-0-17"),
		[]byte("__protVer"), []byte("1.0"), []byte("__srcId"), []byte("azure-cpu-0-17"),
		[]byte("__stVer"), []byte("1.0"),
	}
	for _, c := range []struct {
		name string
		fn   func([]byte) bool
	}{{"ours", validUTF8}, {"scans", refValidUTF8}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, s := range strs {
					if !c.fn(s) {
						b.Fatal("invalid")
					}
				}
			}
		})
	}
}

// BenchmarkMQTTPacketsDecodeRequest decodes a state store request the
// way the poller does (NextScratchAlias: in place, into a Scratch): an
// MQTT 5 QoS 1 PUBLISH with a response topic, correlation data, a message
// expiry, four user properties and a RESP3 GET.
func BenchmarkMQTTPacketsDecodeRequest(b *testing.B) {
	p := &Publish{QoS: 1, PacketID: 9, Topic: "statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke",
		Payload: []byte("*2\r\n$3\r\nGET\r\n$11\r\nk-0-17-1234\r\n")}
	pr := &p.Properties
	pr.Present.Add(PropResponseTopic)
	pr.ResponseTopic = "clients/azure-cpu-0-17/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response"
	pr.Present.Add(PropCorrelationData)
	pr.CorrelationData = bytes.Repeat([]byte{7}, 16)
	pr.Present.Add(PropMessageExpiry)
	pr.MessageExpiry = 10
	pr.User = []UserProperty{{Key: "__ts", Value: "0001764221811000:00000:azure-cpu-0-17"}, {Key: "__protVer", Value: "1.0"},
		{Key: "__srcId", Value: "azure-cpu-0-17"}, {Key: "__stVer", Value: "1.0"}}
	src, err := AppendPacket(nil, p, Version5)
	if err != nil {
		b.Fatal(err)
	}
	var d Decoder
	var sc Scratch
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.NextScratchAlias(Version5, src, &sc); err != nil {
			b.Fatal(err)
		}
	}
}

// refPlainTopic is what plainTopic's true promises: a valid topic name
// (not empty, valid MQTT UTF-8, no wildcard).
func refPlainTopic(b []byte) bool {
	return len(b) > 0 && refValidUTF8(b) && !bytes.ContainsAny(b, "+#")
}

// TestPlainTopicEveryPosition puts each byte that must end plainTopic's
// one-pass check (a wildcard, U+0000, a byte >= 0x80, and neighbours of
// those in the byte order) at every position of names of 0 to 40 bytes:
// true must always mean a valid topic name, and a plain ASCII name
// without wildcards must be seen as one (it is the fast path).
func TestPlainTopicEveryPosition(t *testing.T) {
	inserts := [][]byte{{'+'}, {'#'}, {0}, {0x80}, {0xFF}, []byte("é"), {'*'}, {','}, {'"'}, {'$'}, {0x7F}, {0x01}, {0xAB}, {0xA3}}
	for n := 0; n <= 40; n++ {
		base := []byte(strings.Repeat("abcdefgh/", 5)[:n])
		check := func(b []byte) {
			t.Helper()
			want := refPlainTopic(b)
			got := plainTopic(b)
			if got && !want {
				t.Fatalf("plainTopic(%q) = true for no valid topic name", b)
			}
			if !got && want && bytes.IndexFunc(b, func(r rune) bool { return r >= utf8.RuneSelf }) < 0 {
				t.Fatalf("plainTopic(%q) = false for a plain ASCII topic name", b)
			}
		}
		check(base)
		for pos := 0; pos <= n; pos++ {
			for _, ins := range inserts {
				check(append(append(append([]byte{}, base[:pos]...), ins...), base[pos:]...))
			}
		}
	}
}

// FuzzPlainTopic checks plainTopic against the rule on any bytes.
func FuzzPlainTopic(f *testing.F) {
	for _, s := range []string{"", "a", "a/b/c", "0123456+", "abcdefgh#", "\x00", "topic/é", "01234567\xab"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := refPlainTopic(b)
		if got := plainTopic(b); got && !want || !got && want && bytes.IndexFunc(b, func(r rune) bool { return r >= utf8.RuneSelf }) < 0 {
			t.Fatalf("plainTopic(%q) = %v, want %v", b, got, want)
		}
	})
}
