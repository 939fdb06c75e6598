package record

import (
	"hash/crc32"
	"strings"
	"testing"
	"unicode/utf16"
)

// javaHashRef is an independent reference: encode to UTF-16, then
// s[0]*31^(n-1) + ... + s[n-1] with int32 wrap-around.
func javaHashRef(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func TestRecordTagsHash(t *testing.T) {
	cases := []struct {
		tag  string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"TagA", 2598919},   // 84*31^3 + 97*31^2 + 103*31 + 65
		{"hello", 99162322}, // Java "hello".hashCode()
		{"polygenelubricants", -2147483648},
		{"é", 0xE9},                // U+00E9, one UTF-16 unit
		{"中文", 0x4E2D*31 + 0x6587}, // two BMP units: 646394
		{"😀", 0xD83D*31 + 0xDE00},  // U+1F600 = surrogates D83D DE00: 1772899
		{"a😀b", (97*31+0xD83D)*31*31 + 0xDE00*31 + 98},
	}
	for _, c := range cases {
		if got := JavaHashCode([]byte(c.tag)); got != c.want {
			t.Errorf("JavaHashCode(%q) = %d, want %d", c.tag, got, c.want)
		}
		if got := JavaHashCodeString(c.tag); got != c.want {
			t.Errorf("JavaHashCodeString(%q) = %d, want %d", c.tag, got, c.want)
		}
		if got := TagsHash(c.tag); got != int64(c.want) {
			t.Errorf("TagsHash(%q) = %d, want %d", c.tag, got, c.want)
		}
		if got := TagsHashBytes([]byte(c.tag)); got != int64(c.want) {
			t.Errorf("TagsHashBytes(%q) = %d, want %d", c.tag, got, c.want)
		}
		if ref := javaHashRef(c.tag); ref != c.want {
			t.Errorf("reference(%q) = %d, table says %d", c.tag, ref, c.want)
		}
	}
	if TagsHash("polygenelubricants") != -2147483648 {
		t.Errorf("negative hash not sign-extended")
	}
	for _, s := range []string{"TopicTest#order-1", "Ünïcødé ✓ 𝄞 tag", "\U0010FFFF", "x\xffy", "\xe2\x82"} {
		if got, ref := JavaHashCode([]byte(s)), javaHashRef(s); got != ref {
			t.Errorf("JavaHashCode(%q) = %d, reference %d", s, got, ref)
		}
	}
	b := []byte("TagA||TagB 😀")
	if a := testing.AllocsPerRun(1000, func() { _ = TagsHashBytes(b) }); a != 0 {
		t.Errorf("TagsHashBytes allocates %.1f", a)
	}
}

// JavaHashCode takes eight ASCII bytes at a time where it can: the same
// hash as the reference for any text, whatever its length and wherever
// its non-ASCII bytes are.
func FuzzRecordJavaHashCode(f *testing.F) {
	for _, s := range []string{"", "TopicTest#order-1", "CPU#7F000001000100000000000000000003", "12345678", "1234567", "123456789",
		"abcdefgh\xe2\x82\xacabcdefgh", "ab\xffcdefghijk", "Ünïcødé ✓ 𝄞 tag and some more ascii", "\xe2\x82",
		"T\xe2\x82#\x82\xacKey", "Tøpic#𝄞 key", "##"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, ref := JavaHashCode([]byte(s)), javaHashRef(s); got != ref {
			t.Fatalf("JavaHashCode(%q) = %d, reference %d", s, got, ref)
		}
		if got, ref := JavaHashCodeString(s), javaHashRef(s); got != ref {
			t.Fatalf("JavaHashCodeString(%q) = %d, reference %d", s, got, ref)
		}
		// The index hashes topic+"#", then continues over the key.
		if topic, key, ok := strings.Cut(s, "#"); ok {
			if got, ref := JavaHashCodeFrom(31*JavaHashCode([]byte(topic))+'#', []byte(key)), javaHashRef(s); got != ref {
				t.Fatalf("JavaHashCodeFrom over %q after %q = %d, reference %d", key, topic, got, ref)
			}
		}
	})
}

// BenchmarkRecordJavaHashCode hashes an index key as the broker's sends
// make them: topic#UNIQ_KEY.
func BenchmarkRecordJavaHashCode(b *testing.B) {
	key := []byte("CPU#7F000001000100000000000000000003")
	var h int32
	for b.Loop() {
		h += JavaHashCode(key)
	}
	_ = h
}

// checksumIEEE is crc32.ChecksumIEEE for every length and content.
func FuzzRecordChecksumIEEE(f *testing.F) {
	for _, n := range []int{0, 1, 15, 16, 63, 64, 65, 79, 80, 1023, 1024, 1300, 1311} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for n := len(b); n >= 0 && n > len(b)-20; n-- {
			if got, want := checksumIEEE(b[:n]), crc32.ChecksumIEEE(b[:n]); got != want {
				t.Fatalf("checksumIEEE of %d bytes = %#x, want %#x", n, got, want)
			}
		}
	})
}

// BenchmarkRecordChecksumIEEE hashes a record of 1,311 bytes (a 1 KiB
// send's, a tail of 15 bytes), with the standard library's function and
// with checksumIEEE.
func BenchmarkRecordChecksumIEEE(b *testing.B) {
	p := make([]byte, 1311)
	for i := range p {
		p[i] = byte(i)
	}
	for _, f := range []struct {
		name string
		sum  func([]byte) uint32
	}{{"std", crc32.ChecksumIEEE}, {"tail", checksumIEEE}} {
		b.Run(f.name, func(b *testing.B) {
			var c uint32
			for b.Loop() {
				c += f.sum(p)
			}
			_ = c
		})
	}
}
