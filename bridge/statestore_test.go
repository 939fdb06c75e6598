package bridge

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/smartgo/smartgo/mqtt"
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

// TestStateStoreFrontResponseOwnsEnvelope: a 200 response carries copies
// of the request's response topic and correlation data (in the response's
// own room, or an allocation when they do not fit), since the request's
// bytes are the inline handler call's only: overwriting them afterwards
// leaves the response as it was.
func TestStateStoreFrontResponseOwnsEnvelope(t *testing.T) {
	for _, topicLen := range []int{0, 1, 100, ssEnvelope - 16, ssEnvelope, 300} {
		in := []byte(strings.Repeat("t", topicLen) + "0123456789abcdef")
		topic, corr := string(in[:topicLen]), string(in[topicLen:])
		req := &mqtt.Message{CorrelationData: in[topicLen:]}
		if topicLen > 0 {
			req.ResponseTopic = unsafe.String(&in[0], topicLen) // aliases in, as an inline request does
		}
		var r ssResponse
		r.envelopeOf(req)
		for i := range in {
			in[i] = 0xDB
		}
		if r.m.Topic != topic || string(r.m.CorrelationData) != corr {
			t.Fatalf("topic of %d bytes: response topic %q, correlation data %q after the request's bytes changed", topicLen, r.m.Topic, r.m.CorrelationData)
		}
		if cap(r.m.CorrelationData) != len(corr) {
			t.Fatalf("correlation data has room after it (cap %d)", cap(r.m.CorrelationData))
		}
	}
}
