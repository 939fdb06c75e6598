package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

func TestMQTTBadInput(t *testing.T) {
	ts := startServer(t, nil)
	bystander := connected(t, ts.addr, v5, "bystander")
	bystander.subscribe(1, sub("ok", 0))
	cases := []struct {
		name string
		v    packets.Version
		pre  bool // connect first
		raw  []byte
		want int // DISCONNECT code, -1 for plain close
	}{
		{"publish before connect", v5, false, []byte{0x30, 0x05, 0, 1, 'a', 'h', 'i'}, -1},
		{"second connect v5", v5, true, nil, int(packets.ReasonProtocolError)},
		{"second connect v3", v311, true, nil, -1},
		{"reserved flags on SUBSCRIBE", v5, true, []byte{0x80, 0x06, 0, 1, 0, 1, 'a', 0}, int(packets.ReasonMalformedPacket)},
		{"wildcard topic name", v5, true, []byte{0x30, 0x04, 0, 1, '#', 0}, int(packets.ReasonTopicNameInvalid)},
		{"invalid UTF-8 topic", v5, true, []byte{0x30, 0x05, 0, 2, 0xC3, 0x28, 0}, int(packets.ReasonMalformedPacket)},
		{"invalid UTF-8 topic v3", v311, true, []byte{0x30, 0x04, 0, 2, 0xC3, 0x28}, -1},
		{"QoS 3", v5, true, []byte{0x36, 0x04, 0, 1, 'a', 0}, int(packets.ReasonMalformedPacket)},
		{"oversized", v5, true, []byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F}, int(packets.ReasonPacketTooLarge)},
		{"AUTH without method", v5, true, []byte{0xF0, 0x00}, int(packets.ReasonProtocolError)},
		{"server-only packet", v5, true, []byte{0xD0, 0x00}, int(packets.ReasonProtocolError)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, ts.addr, tc.v)
			if tc.pre {
				r.connect(&packets.Connect{ClientID: "bad", CleanStart: true})
			}
			if tc.raw == nil {
				r.send(&packets.Connect{ClientID: "bad", CleanStart: true})
			} else {
				r.sendBytes(tc.raw)
			}
			if code := r.closed(); code != tc.want {
				t.Fatalf("got DISCONNECT %d, want %d", code, tc.want)
			}
		})
	}
	if !strings.Contains(ts.logs.String(), "client=bad") {
		t.Fatalf("no log line naming the client:\n%s", ts.logs.String())
	}
	p := connected(t, ts.addr, v5, "p")
	p.send(&packets.Publish{Topic: "ok", Payload: []byte("still here")})
	if got := bystander.expectPublish(); string(got.Payload) != "still here" {
		t.Fatal("bystander affected")
	}
}

func TestMQTTMalformedConnectV5(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	// CONNECT v5 with the reserved connect flag set.
	r.sendBytes([]byte{0x10, 0x0D, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x03, 0, 60, 0, 0, 0})
	ack, ok := r.recv().(*packets.Connack)
	if !ok || ack.ReasonCode != packets.ReasonMalformedPacket {
		t.Fatalf("want CONNACK 0x81, got %+v", ack)
	}
	r.closed()
}

func TestMQTTReceiveMaximumExceeded(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ReceiveMaximum = 2 })
	r := connected(t, ts.addr, v5, "flood")
	for id := uint16(1); id <= 3; id++ {
		r.send(&packets.Publish{QoS: 2, PacketID: id, Topic: "x"})
	}
	code := -1
	for {
		p, err := r.next(5 * time.Second)
		if err != nil {
			break
		}
		if d, ok := p.(*packets.Disconnect); ok {
			code = int(d.ReasonCode)
		}
	}
	if code != int(packets.ReasonReceiveMaximumExceeded) {
		t.Fatalf("got %d, want 0x93", code)
	}
}

func TestMQTTOutboundLimits(t *testing.T) {
	ts := startServer(t, nil)
	// The client allows packets of at most 64 bytes and receives 1 in flight.
	s := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "small", CleanStart: true}
	cp.Properties.Present = propSet(packets.PropMaximumPacketSize, packets.PropReceiveMaximum)
	cp.Properties.MaximumPacketSize, cp.Properties.ReceiveMaximum = 64, 1
	s.connect(cp)
	s.subscribe(1, sub("big/#", 1))
	p := connected(t, ts.addr, v5, "p")
	p.publish1(1, "big/a", strings.Repeat("x", 100))
	p.publish1(2, "big/b", "small 1")
	p.publish1(3, "big/c", "small 2")
	got := s.expectPublish()
	if string(got.Payload) != "small 1" {
		t.Fatalf("oversized message not dropped: %q", got.Payload)
	}
	s.nothing(100 * time.Millisecond) // receive maximum 1
	s.send(&packets.Puback{PacketID: got.PacketID})
	if got := s.expectPublish(); string(got.Payload) != "small 2" {
		t.Fatalf("%q", got.Payload)
	}
}

func TestMQTTSlowReaderDisconnected(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxOutbound = 256 << 10; o.MaxQueuedMessages = 100000 })
	slow := dialRaw(t, ts.addr, v5)
	slow.nc.(*net.TCPConn).SetReadBuffer(4096)
	slow.connect(&packets.Connect{ClientID: "slow", CleanStart: true})
	slow.subscribe(1, sub("flood", 1))
	fast := connected(t, ts.addr, v5, "fast")
	fast.subscribe(1, sub("flood", 0))
	p := connected(t, ts.addr, v5, "p")
	payload := strings.Repeat("y", 32<<10)
	for i := 0; i < 600 && !strings.Contains(ts.logs.String(), "slow reader"); i++ {
		p.send(&packets.Publish{Topic: "flood", QoS: 1, PacketID: uint16(i + 1), Payload: []byte(payload)})
		fast.expectPublish()
	}
	testutil.WaitFor(t, 5*time.Second, "slow reader log", func() bool { return strings.Contains(ts.logs.String(), "slow reader") })
	if !strings.Contains(ts.logs.String(), "client=slow") {
		t.Fatal("log does not name the client")
	}
}

func TestMQTTKeepAliveTimeout(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	r.connect(&packets.Connect{ClientID: "ka", CleanStart: true, KeepAlive: 1})
	start := time.Now()
	if code := r.closed(); code != int(packets.ReasonKeepAliveTimeout) {
		t.Fatalf("got %d, want 0x8D", code)
	}
	// Not before 1.5 keep alives; the upper bound only catches a close
	// that never comes on time, loose enough for a stall under load.
	if el := time.Since(start); el < 1400*time.Millisecond || el > 10*time.Second {
		t.Fatalf("closed after %v, want about 1.5 s", el)
	}
	// Pings keep it alive.
	r = dialRaw(t, ts.addr, v5)
	r.connect(&packets.Connect{ClientID: "ka2", CleanStart: true, KeepAlive: 1})
	for range 4 {
		time.Sleep(500 * time.Millisecond)
		r.send(&packets.Pingreq{})
		r.recv()
	}
}

func TestMQTTConnectTimeout(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ConnectTimeout = 300 * time.Millisecond })
	r := dialRaw(t, ts.addr, v5)
	r.closed()
	testutil.WaitFor(t, 10*time.Second, "connection count", func() bool { return ts.Stats().Connections.Load() == 0 })
}

func TestMQTTTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	ts := startServer(t, func(o *Options) {
		o.TLSListen = []string{"127.0.0.1:0"}
		o.TLSCertFile, o.TLSKeyFile = cert, key
	})
	tlsAddr := ts.Addrs()[1].String()
	nc, err := tls.Dial("tcp", tlsAddr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	r := wrapRaw(t, nc, v5)
	r.connect(&packets.Connect{ClientID: "tls", CleanStart: true})
	r.subscribe(1, sub("sec", 1))
	p := connected(t, ts.addr, v311, "plain")
	p.publish1(1, "sec", "over tls")
	if got := r.expectPublish(); string(got.Payload) != "over tls" {
		t.Fatalf("%+v", got)
	}
	r.send(&packets.Disconnect{})
	r.closed()
}

func TestMQTTOptionsValidate(t *testing.T) {
	bad := []func(*Options){
		func(o *Options) { o.Listen = nil },
		func(o *Options) { o.MaxPacketSize = 10 },
		func(o *Options) { o.ReceiveMaximum = 70000 },
		func(o *Options) { o.TLSListen = []string{":0"} },
		func(o *Options) { o.ReservedFilters = []string{"a/#/b"} },
	}
	for i, f := range bad {
		o := DefaultOptions()
		f(&o)
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(DefaultOptions(), nil); err == nil {
		t.Fatal("nil backend accepted")
	}
}

func TestMQTTServerCloseIdempotent(t *testing.T) {
	ts := startServer(t, nil)
	r := connected(t, ts.addr, v5, "c")
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if code := r.closed(); code != int(packets.ReasonServerShuttingDown) {
		t.Fatalf("got %d", code)
	}
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(context.Background()); err == nil {
		t.Fatal("restart after close accepted")
	}
}

func writeSelfSigned(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := selfSigned(t)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A message no PUBLISH can carry (a user property over 65535 bytes) is
// dropped, not left in flight: it would hold the client's only
// receive-maximum slot, so nothing after it would ever be delivered.
func TestMQTTUnencodableMessageNotInFlight(t *testing.T) {
	ts := startServer(t, nil)
	s := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "one-slot", CleanStart: true}
	cp.Properties.Present = propSet(packets.PropReceiveMaximum)
	cp.Properties.ReceiveMaximum = 1
	s.connect(cp)
	s.subscribe(1, sub("u/#", 1))
	ctx := context.Background()
	bad := &Message{Topic: "u/bad", QoS: 1, Payload: []byte("bad"), User: []UserProperty{{Key: "k", Value: strings.Repeat("v", 70_000)}}}
	if err := ts.Publish(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := ts.Publish(ctx, &Message{Topic: "u/good", QoS: 1, Payload: []byte("good")}); err != nil {
		t.Fatal(err)
	}
	got := s.expectPublish()
	if string(got.Payload) != "good" {
		t.Fatalf("got %q, want the message after the unencodable one", got.Payload)
	}
	s.send(&packets.Puback{PacketID: got.PacketID})
	if n := ts.Stats().Dropped.Load(); n < 1 {
		t.Fatalf("dropped %d, want the unencodable message counted", n)
	}
}

// TestMaxClientIDLen: a CONNECT whose client id is longer than
// Options.MaxClientIDLen is refused with 0x85 (3.1.1: 0x02) and no
// session; one of exactly that length connects; 0 leaves MQTT's bound.
func TestMaxClientIDLen(t *testing.T) {
	if err := (Options{Listen: []string{"127.0.0.1:0"}, MaxClientIDLen: -1}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("negative MaxClientIDLen: %v", err)
	}
	ts := startServer(t, func(o *Options) { o.MaxClientIDLen = 8 })
	for _, v := range []packets.Version{v311, v5} {
		r := dialRaw(t, ts.addr, v)
		ack := r.Connect(&packets.Connect{ClientID: "123456789", KeepAlive: 60})
		want := packets.ReasonClientIdentifierNotValid
		if v == v311 {
			want = packets.ConnectRefusedIdentifierRejected
		}
		if ack.ReasonCode != want || ack.SessionPresent {
			t.Fatalf("v%d 9-byte id: CONNACK %#x, want %#x", v, byte(ack.ReasonCode), byte(want))
		}
		if v == v5 && ack.Properties.ReasonString != "client identifier of 9 bytes, at most 8" {
			t.Fatalf("reason string %q", ack.Properties.ReasonString)
		}
		r.closed()
		connected(t, ts.addr, v, "12345678").send(&packets.Disconnect{})
	}
	long := strings.Repeat("z", 65535)
	free := startServer(t, nil)
	connected(t, free.addr, v5, long).send(&packets.Disconnect{})
}

// TestMaxIdentityLen: a CONNECT whose client id and user name together
// pass Options.MaxIdentityLen is refused with 0x86 (3.1.1: 0x04) and a
// reason naming both sizes; at the bound it connects.
func TestMaxIdentityLen(t *testing.T) {
	if err := (Options{Listen: []string{"127.0.0.1:0"}, MaxIdentityLen: -1}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("negative MaxIdentityLen: %v", err)
	}
	ts := startServer(t, func(o *Options) { o.MaxIdentityLen = 10 })
	for _, v := range []packets.Version{v311, v5} {
		r := dialRaw(t, ts.addr, v)
		ack := r.Connect(&packets.Connect{ClientID: "1234", UsernameFlag: true, Username: "1234567", KeepAlive: 60})
		want := packets.ReasonBadUserNameOrPassword
		if v == v311 {
			want = packets.ConnectRefusedBadUsernameOrPassword
		}
		if ack.ReasonCode != want || ack.SessionPresent {
			t.Fatalf("v%d 11 bytes: CONNACK %#x, want %#x", v, byte(ack.ReasonCode), byte(want))
		}
		if v == v5 && ack.Properties.ReasonString != "user name of 7 bytes with a client identifier of 4, at most 10 together" {
			t.Fatalf("reason string %q", ack.Properties.ReasonString)
		}
		r.closed()
		r = dialRaw(t, ts.addr, v)
		if ack := r.Connect(&packets.Connect{ClientID: "1234", UsernameFlag: true, Username: "123456", KeepAlive: 60, CleanStart: true}); ack.ReasonCode != 0 {
			t.Fatalf("v%d 10 bytes: CONNACK %#x", v, byte(ack.ReasonCode))
		}
		r.send(&packets.Disconnect{})
	}
}

// A client whose Maximum Packet Size is below the full CONNACK still gets
// one (MQTT-3.1.2-24): the server leaves out the properties whose absence
// means the same ("available" flags) and then Topic Alias Maximum, whose
// absence means 0. The CONNACK was dropped whole before: the client sat
// connected without knowing it.
func TestMQTTConnackFitsSmallMaximumPacketSize(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct {
		id      string
		max     uint32
		aliases bool
	}{{"mps19", 19, true}, {"mps16", 16, false}} {
		r := dialRaw(t, ts.addr, v5)
		cp := &packets.Connect{ClientID: tc.id, CleanStart: true}
		cp.Properties.Present = propSet(packets.PropMaximumPacketSize)
		cp.Properties.MaximumPacketSize = tc.max
		ack := r.connect(cp)
		ap := &ack.Properties
		if ack.ReasonCode != 0 || !ap.Present.Has(packets.PropReceiveMaximum) || !ap.Present.Has(packets.PropMaximumPacketSize) {
			t.Fatalf("max %d: CONNACK %+v", tc.max, ack)
		}
		if ap.Present.Has(packets.PropRetainAvailable) || ap.Present.Has(packets.PropSharedSubAvailable) {
			t.Fatalf("max %d: CONNACK kept the available flags: %+v", tc.max, ap)
		}
		if got := ap.Present.Has(packets.PropTopicAliasMaximum); got != tc.aliases {
			t.Fatalf("max %d: Topic Alias Maximum present %v, want %v (%+v)", tc.max, got, tc.aliases, ap.Present)
		}
		r.send(&packets.Disconnect{})
		r.closed()
	}
}

// A CONNACK that is over the client's Maximum Packet Size even after
// fitConnack shed what it may (an assigned client id of 32 bytes needs
// about 51) refuses the connect before it touches a session: the client
// gets CONNACK 0x83 of 5 bytes when that fits (else nothing) and the
// close, no session is created, and an earlier connection of the same
// client id is not taken over. Before, the CONNACK was dropped and the
// connection left open, its session "connected".
func TestMQTTConnackOverMaximumPacketSizeRefused(t *testing.T) {
	ts := startServer(t, nil)
	live := connected(t, ts.addr, v5, "held")
	before := ts.Stats().Sessions.Load()

	for _, tc := range []struct {
		name string
		max  uint32
		cp   packets.Connect
		ack  bool // a 5-byte CONNACK fits
	}{
		{"assigned id", 40, packets.Connect{CleanStart: true, KeepAlive: 60}, true},
		{"assigned id, max 4", 4, packets.Connect{CleanStart: true, KeepAlive: 60}, false},
		// keep alive 0 and expiry over the server's maximum: Server Keep
		// Alive and Session Expiry must go with the CONNACK (21 bytes).
		{"taking over", 16, packets.Connect{ClientID: "held", CleanStart: true}, true},
	} {
		r := dialRaw(t, ts.addr, v5)
		cp := tc.cp
		cp.Properties.Present = propSet(packets.PropMaximumPacketSize, packets.PropSessionExpiry)
		cp.Properties.MaximumPacketSize = tc.max
		cp.Properties.SessionExpiry = 0xFFFFFFFF
		r.send(&cp)
		if tc.ack {
			ack, ok := r.recv().(*packets.Connack)
			if !ok || ack.ReasonCode != packets.ReasonImplementationSpecificError || ack.SessionPresent || ack.Properties.Present != 0 {
				t.Fatalf("%s: want CONNACK 0x83 without properties, got %+v", tc.name, ack)
			}
			if b, err := packets.AppendPacket(nil, ack, packets.Version5); err != nil || len(b) > int(tc.max) {
				t.Fatalf("%s: CONNACK of %d bytes over %d (%v)", tc.name, len(b), tc.max, err)
			}
		}
		if code := r.closed(); code != -1 {
			t.Fatalf("%s: DISCONNECT %#x before any CONNACK", tc.name, code)
		}
	}
	if got := ts.Stats().Sessions.Load(); got != before {
		t.Fatalf("sessions %d after the refused connects, want %d", got, before)
	}
	cs := ts.Clients()
	if len(cs) != 1 || cs[0].ClientID != "held" {
		t.Fatalf("connected clients %+v, want only held", cs)
	}
	// The earlier connection of "held" was not taken over.
	if a := live.publish1(1, "still/here", "x"); a.ReasonCode != 0 {
		t.Fatalf("held: PUBACK %#x", byte(a.ReasonCode))
	}
	live.send(&packets.Disconnect{})
	live.closed()
}
