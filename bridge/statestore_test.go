package bridge

import (
	"testing"
	"unsafe"
)

// TestStateStoreFrontCanonicalHLC pins the __ts the front derives from a
// broker's version string: the canonical String form, the input itself
// when already canonical, nothing for an empty or malformed version.
func TestStateStoreFrontCanonicalHLC(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"001795339448122:00001:StateStore", "001795339448122:00001:StateStore", true},
		{"1:0:n", "000000000000001:00000:n", true},
		{"001795339448122:123456:n", "001795339448122:123456:n", true},
		{"", "", false},
		{"nonsense", "", false},
		{"000000000000000:00000:n", "000000000000000:00000:n", true}, // a node id makes it non-zero
	} {
		got, ok := ssCanonicalHLC(c.in)
		if got != c.want || ok != c.ok {
			t.Fatalf("%q: got %q %v, want %q %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestStateStoreFrontCallSize keeps a request's call (ssCall, recycled
// through ssCalls when answered at once, allocated when answered later)
// at 512 bytes: the largest object with pointers that the Go allocator
// serves without a type header (a bigger one costs a header and a slower
// allocation path), with as much room for the dedup key as fits.
func TestStateStoreFrontCallSize(t *testing.T) {
	if n := unsafe.Sizeof(ssCall{}); n != 512 {
		t.Fatalf("ssCall is %d bytes: resize its dedup array to make it 512", n)
	}
}
