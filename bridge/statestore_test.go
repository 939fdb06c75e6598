package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
	"github.com/smartgo/smartgo/statestore"
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

// TestStateStoreFrontCanonicalShape: the shape check that lets a version
// text through without a parse agrees with the parse on every text it
// accepts (it parses, to a non-zero HLC whose String form is the text),
// and accepts every String form of a 15-digit wall clock and a 5-digit
// counter (a longer one takes the parse, which keeps it too).
func TestStateStoreFrontCanonicalShape(t *testing.T) {
	long := strings.Repeat("n", statestore.MaxNodeIDLen)
	texts := []string{"", "nonsense", "1:0:n", "001795339448122:00001:StateStore", "001795339448122:00001:",
		"001795339448122:00001:a:b", "00179533944812x:00001:n", "001795339448122:0000x:n", "001795339448122;00001:n",
		"001795339448122:00001;n", "0017953394481220:00001:n", "000000000000000:00000:n", "999999999999999:99999:" + long,
		"999999999999999:99999:" + long + "n", "001795339448122:123456:n", "-01795339448122:00001:n"}
	for _, h := range []statestore.HLC{{Wall: 1, Node: "n"}, {Wall: 1795339448122, Counter: 7, Node: "broker-a"},
		{Wall: 999999999999999, Counter: 99999, Node: long}} {
		texts = append(texts, h.String())
	}
	for _, s := range texts {
		v, err := statestore.ParseHLC(s)
		canonical := err == nil && !v.IsZero() && v.String() == s
		short := canonical && len(s) > 22 && s[15] == ':' && s[21] == ':'
		if got := ssCanonicalShape(s); got != short || got && !canonical {
			t.Errorf("%q: shape %v, parse says canonical %v (%v)", s, got, canonical, err)
		}
		if got, ok := ssCanonicalHLC(s); ok != (err == nil && !v.IsZero()) || ok && got != v.String() {
			t.Errorf("%q: ssCanonicalHLC %q %v, parse %v %v", s, got, ok, v, err)
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

// TestStateStoreFrontResponsesRecycled: the front's 200 responses go back
// to their pool once acknowledged and are rebuilt whole for the next
// request (under the race detector a recycled response is poisoned
// first, so a field left over or a response sent after its recycling
// shows); one in flight when its client's connection dropped stays the
// session's and is resent intact on the resumed session.
func TestStateStoreFrontResponsesRecycled(t *testing.T) {
	opts := mqtt.DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	srv, err := mqtt.NewServer(opts, mqtt.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	f := &StateStoreFront{srv: srv, log: slog.New(slog.DiscardHandler)}
	addr := srv.Addrs()[0].String()
	connect := func(id string) (*mqtttest.Conn, bool) {
		c := mqtttest.Dial(t, addr, packets.Version5)
		cp := &packets.Connect{ClientID: id, KeepAlive: 60}
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = 600
		return c, c.Connect(cp).SessionPresent
	}
	respond := func(id string, i int) {
		req := &mqtt.Message{ResponseTopic: fmt.Sprintf("clients/%s/resp/%d", id, i),
			CorrelationData: fmt.Appendf(nil, "corr-%011d", i), Expiry: time.Now().Add(time.Minute)}
		f.respondOK(nil, id, req, fmt.Appendf(nil, "$1\r\n%d\r\n", i%10), fmt.Sprintf("%015d:%05d:n", 1000+i, i))
	}
	check := func(p *packets.Publish, id string, i int, dup bool) {
		t.Helper()
		pr := &p.Properties
		want := fmt.Sprintf("%015d:%05d:n", 1000+i, i)
		if p.Dup != dup || p.Topic != fmt.Sprintf("clients/%s/resp/%d", id, i) || string(p.Payload) != fmt.Sprintf("$1\r\n%d\r\n", i%10) ||
			string(pr.CorrelationData) != fmt.Sprintf("corr-%011d", i) || pr.ContentType != statestore.ContentType ||
			len(pr.User) != 3 || pr.User[0].Value != statestore.Status200 || pr.User[2].Value != want {
			t.Fatalf("response %d of %s: %+v", i, id, p)
		}
	}
	held, _ := connect("held")
	respond("held", 0)
	check(held.Recv().(*packets.Publish), "held", 0, false)
	held.NC.Close() // response 0 unacknowledged: the session keeps it
	busy, _ := connect("busy")
	for i := range 200 {
		respond("busy", i)
		p := busy.Recv().(*packets.Publish)
		check(p, "busy", i, false)
		busy.Send(&packets.Puback{PacketID: p.PacketID})
	}
	// The session (expiry 600 s) outlives its connection: resuming it
	// takes it over whether or not the server has seen the close yet.
	held, present := connect("held")
	if !present {
		t.Fatal("held's session not resumed")
	}
	check(held.Recv().(*packets.Publish), "held", 0, true)
}
