package iothub

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/bridge/iothub/amqp1"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
)

// withAMQPS gives a node the AMQP endpoint on 127.0.0.1:0.
func withAMQPS(t testing.TB) nodeConfig {
	cert, key, _ := selfSignedFiles(t, t.TempDir(), testHost, true)
	return func(_ *mqtt.Options, _ *bridge.Options, o *Options) {
		o.AMQPSListen = []string{"127.0.0.1:0"}
		o.TLSCertFile, o.TLSKeyFile = cert, key
	}
}

// onlineC2DDevice creates a device and connects it, subscribed to its
// cloud-to-device messages.
func onlineC2DDevice(t testing.TB, n *node, name string) (*twincli.Device, *device) {
	t.Helper()
	dev := createDevice(t, n, name)
	id := Identity{DeviceID: name}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.subscribe("devices/" + name + "/messages/devicebound/#")
	return dev, d
}

// ownerToken is a SAS token of the owner policy, valid for an hour.
func ownerToken(t testing.TB) string {
	t.Helper()
	tok, err := SignToken(testHost, "owner", testPolicyKey, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// amqpClient is a hand-driven AMQP 1.0 client for the tests.
type amqpClient struct {
	t  testing.TB
	nc net.Conn
	fr *amqp1.FrameReader
}

func dialAMQP(t testing.TB, n *node) *amqpClient {
	t.Helper()
	nc, err := tls.Dial("tcp", n.hub.AMQPSAddrs()[0].String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &amqpClient{t: t, nc: nc, fr: &amqp1.FrameReader{R: nc, Max: 1 << 20}}
}

func (c *amqpClient) raw(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *amqpClient) send(typ byte, perf *amqp1.Described, payload []byte) {
	c.t.Helper()
	c.raw(amqp1.AppendFrame(nil, typ, 0, perf, payload))
}

// header reads the server's protocol header.
func (c *amqpClient) header() [8]byte {
	c.t.Helper()
	var h [8]byte
	if _, err := io.ReadFull(c.nc, h[:]); err != nil {
		c.t.Fatal(err)
	}
	return h
}

// next reads the next performative that is not a heartbeat or, unless
// flows is set, a flow.
func (c *amqpClient) next(flows bool) (uint64, []any, []byte) {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if len(f.Body) == 0 {
			continue
		}
		code, fields, rest, err := amqp1.Performative(f.Body)
		if err != nil {
			c.t.Fatal(err)
		}
		if code == amqp1.CodeFlow && !flows {
			continue
		}
		return code, fields, append([]byte(nil), rest...)
	}
}

func (c *amqpClient) expect(code uint64) []any {
	c.t.Helper()
	got, fields, _ := c.next(false)
	if got != code {
		c.t.Fatalf("got performative %#x %v, want %#x", got, fields, code)
	}
	return fields
}

// closed expects a close carrying cond, then the end of the stream.
func (c *amqpClient) closed(cond amqp1.Symbol) {
	c.t.Helper()
	f := c.expect(amqp1.CodeClose)
	if e := amqp1.ErrorOf(amqp1.Field(f, 0)); !strings.HasPrefix(e, string(cond)) {
		c.t.Fatalf("close error %q, want %s", e, cond)
	}
	if _, err := c.fr.ReadFrame(); !errors.Is(err, io.EOF) {
		c.t.Fatalf("after the close: %v", err)
	}
}

// connect runs SASL (mech, and PLAIN's password) and open and begin.
func (c *amqpClient) connect(mech, password string) {
	c.t.Helper()
	c.raw(amqp1.HeaderSASL[:])
	if c.header() != amqp1.HeaderSASL {
		c.t.Fatal("no SASL header")
	}
	f, _ := c.fr.ReadFrame()
	if code, _, _, _ := amqp1.Performative(f.Body); code != amqp1.CodeSASLMechanisms {
		c.t.Fatalf("want sasl-mechanisms, got %#x", code)
	}
	c.send(amqp1.TypeSASL, amqp1.Perf(amqp1.CodeSASLInit, amqp1.Symbol(mech), []byte("\x00owner\x00"+password)), nil)
	f, _ = c.fr.ReadFrame()
	_, fields, _, _ := amqp1.Performative(f.Body)
	if o, _ := amqp1.Uint(fields, 0); o != 0 {
		c.t.Fatalf("sasl-outcome %d", o)
	}
	c.raw(amqp1.HeaderAMQP[:])
	if c.header() != amqp1.HeaderAMQP {
		c.t.Fatal("no AMQP header")
	}
	c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeOpen, "test", testHost, uint32(1<<20)), nil)
	c.expect(amqp1.CodeOpen)
	c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeBegin, nil, uint32(0), uint32(1000), uint32(1000)), nil)
	c.expect(amqp1.CodeBegin)
}

// attachSender attaches a link the client sends on to addr as handle h;
// it returns the server's attach.
func (c *amqpClient) attachSender(h uint32, addr string) []any {
	c.t.Helper()
	c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeAttach, "s", h, amqp1.RoleSender, nil, nil,
		amqp1.Perf(amqp1.CodeSource, "client"), amqp1.Perf(amqp1.CodeTarget, addr), nil, nil, uint32(0)), nil)
	return c.expect(amqp1.CodeAttach)
}

// transfer sends a message in frames of at most chunk bytes and returns
// the delivery's outcome (the disposition's state).
func (c *amqpClient) transfer(h, id uint32, msg []byte, chunk int) *amqp1.Described {
	c.t.Helper()
	for first := true; first || len(msg) > 0; first = false {
		part := msg[:min(chunk, len(msg))]
		msg = msg[len(part):]
		if first {
			c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeTransfer, h, id, []byte{byte(id)}, uint32(0), false, len(msg) > 0), part)
		} else {
			c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeTransfer, h, nil, nil, nil, nil, len(msg) > 0), part)
		}
	}
	f := c.expect(amqp1.CodeDisposition)
	if first, _ := amqp1.Uint(f, 1); first != uint64(id) {
		c.t.Fatalf("disposition of %d, want %d", first, id)
	}
	st, _ := amqp1.Field(f, 4).(*amqp1.Described)
	if st == nil {
		c.t.Fatalf("disposition without a state: %v", f)
	}
	return st
}

func c2dBytes(to, id string, body []byte, props map[string]string) []byte {
	var b []byte
	b = amqp1.Append(b, amqp1.Perf(amqp1.CodeProperties, id, nil, to))
	m := &amqp1.Map{}
	for k, v := range props {
		m.Keys, m.Values = append(m.Keys, k), append(m.Values, v)
	}
	b = amqp1.Append(b, &amqp1.Described{Descriptor: uint64(amqp1.CodeApplicationProperties), Value: m})
	return amqp1.Append(b, &amqp1.Described{Descriptor: uint64(amqp1.CodeData), Value: body})
}

// outcome is a delivery state as "accepted" or the rejection's condition.
func outcome(st *amqp1.Described) string {
	switch code, _ := st.Code(); code {
	case amqp1.CodeAccepted:
		return "accepted"
	case amqp1.CodeRejected:
		l, _ := st.Value.([]any)
		return amqp1.ErrorOf(amqp1.Field(l, 0))
	}
	return "?"
}

// TestHubAMQPC2D: a back end with a policy's token (SASL PLAIN) sends
// cloud-to-device messages over AMQP; each is settled accepted once
// stored and reaches the device with its id and properties; one split
// over several transfer frames is put back together; a device that is
// not registered, a "to" that names no device and a body over the limit
// are rejected with the conditions the SDKs map to their errors.
func TestHubAMQPC2D(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))
	_, d := onlineC2DDevice(t, n, "lamp")

	tok := ownerToken(t)
	a := dialAMQP(t, n)
	a.connect("PLAIN", tok)
	if at := a.attachSender(1, c2dAddress); amqp1.Field(at, 6) == nil {
		t.Fatalf("devicebound attach refused: %v", at)
	}
	if st := a.transfer(1, 0, c2dBytes("/devices/lamp/messages/devicebound", "m-1", []byte("on"), map[string]string{"color": "red"}), 1<<20); outcome(st) != "accepted" {
		t.Fatalf("first message: %s", outcome(st))
	}
	p := d.expect()
	props := c2dProps(t, p.Topic)
	if string(p.Payload) != "on" || props["$.mid"] != "m-1" || props["color"] != "red" {
		t.Fatalf("got %s %q", p.Topic, p.Payload)
	}
	// 40 KiB in frames of 1,000 bytes.
	big := []byte(strings.Repeat("x", 40<<10))
	if st := a.transfer(1, 1, c2dBytes("/devices/lamp/messages/devicebound", "m-2", big, nil), 1000); outcome(st) != "accepted" {
		t.Fatalf("split message: %s", outcome(st))
	}
	if p := d.expect(); len(p.Payload) != len(big) {
		t.Fatalf("split message arrived with %d bytes", len(p.Payload))
	}
	for i, c := range []struct{ to, want string }{
		{"/devices/nobody/messages/devicebound", string(amqp1.CondNotFound)},
		{"/devices/lamp/messages/elsewhere", string(amqp1.CondArgumentError)},
	} {
		if got := outcome(a.transfer(1, uint32(2+i), c2dBytes(c.to, "", []byte("x"), nil), 1<<20)); !strings.HasPrefix(got, c.want) {
			t.Fatalf("to %s: %s, want %s", c.to, got, c.want)
		}
	}
	if got := outcome(a.transfer(1, 4, c2dBytes("/devices/lamp/messages/devicebound", "", make([]byte, 70<<10), nil), 8000)); !strings.HasPrefix(got, string(amqp1.CondMessageSize)) {
		t.Fatalf("70 KiB body: %s", got)
	}
	// An unknown node: the attach comes back without a target, then a
	// detach with amqp:not-found; the connection goes on.
	if at := a.attachSender(2, "/messages/events"); amqp1.Field(at, 6) != nil {
		t.Fatalf("attach to an unknown node: %v", at)
	}
	if f := a.expect(amqp1.CodeDetach); !strings.HasPrefix(amqp1.ErrorOf(amqp1.Field(f, 2)), string(amqp1.CondNotFound)) {
		t.Fatalf("detach %v", f)
	}
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeClose), nil)
	a.expect(amqp1.CodeClose)
}

// TestHubAMQPAuth: without a put-token nothing is sent; a put-token is
// answered on the $cbs reply link (200, or 401 for a bad signature); a
// policy without serviceConnect cannot send; SASL PLAIN with a bad token
// fails the SASL outcome.
func TestHubAMQPAuth(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))
	createDevice(t, n, "lamp")
	to := "/devices/lamp/messages/devicebound"

	a := dialAMQP(t, n)
	a.connect("ANONYMOUS", "")
	a.attachSender(0, c2dAddress)
	if got := outcome(a.transfer(0, 0, c2dBytes(to, "", []byte("x"), nil), 1<<20)); !strings.HasPrefix(got, string(amqp1.CondUnauthorized)) {
		t.Fatalf("without a token: %s", got)
	}
	// CBS: a request link and a reply link with credit.
	a.attachSender(1, cbsAddress)
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeAttach, "r", uint32(2), amqp1.RoleReceiver, nil, nil,
		amqp1.Perf(amqp1.CodeSource, cbsAddress), amqp1.Perf(amqp1.CodeTarget, "cbs")), nil)
	a.expect(amqp1.CodeAttach)
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeFlow, uint32(0), uint32(1000), uint32(0), uint32(1000), uint32(2), uint32(0), uint32(10)), nil)
	putToken := func(id uint32, token string) int32 {
		t.Helper()
		var b []byte
		b = amqp1.Append(b, amqp1.Perf(amqp1.CodeProperties, "req-"+string(rune('a'+id)), nil, cbsAddress, nil, "cbs"))
		b = amqp1.Append(b, &amqp1.Described{Descriptor: uint64(amqp1.CodeApplicationProperties), Value: &amqp1.Map{
			Keys: []any{"operation", "type", "name"}, Values: []any{"put-token", "servicebus.windows.net:sastoken", testHost}}})
		b = amqp1.Append(b, &amqp1.Described{Descriptor: uint64(amqp1.CodeAMQPValue), Value: token})
		if got := outcome(a.transfer(1, id, b, 1<<20)); got != "accepted" {
			t.Fatalf("put-token delivery: %s", got)
		}
		code, f, payload := a.next(false)
		if code != amqp1.CodeTransfer {
			t.Fatalf("want the put-token reply, got %#x %v", code, f)
		}
		m, err := amqp1.DecodeMessage(payload)
		if err != nil {
			t.Fatal(err)
		}
		if amqp1.IDString(m.CorrelationID) != "req-"+string(rune('a'+id)) {
			t.Fatalf("reply correlation %v", m.CorrelationID)
		}
		st, _ := m.Properties.Get("status-code")
		return st.(int32)
	}
	bad, _ := SignToken(testHost, "owner", "d3Jvbmcga2V5", time.Now().Add(time.Hour))
	if st := putToken(1, bad); st != 401 {
		t.Fatalf("bad signature: %d", st)
	}
	reader, _ := SignToken(testHost, "reader", testPolicyKey, time.Now().Add(time.Hour))
	if st := putToken(2, reader); st != 200 {
		t.Fatalf("reader token: %d", st)
	}
	if got := outcome(a.transfer(0, 3, c2dBytes(to, "", []byte("x"), nil), 1<<20)); !strings.HasPrefix(got, string(amqp1.CondUnauthorized)) {
		t.Fatalf("reader policy: %s", got)
	}
	if st := putToken(4, ownerToken(t)); st != 200 {
		t.Fatalf("owner token: %d", st)
	}
	if got := outcome(a.transfer(0, 5, c2dBytes(to, "", []byte("x"), nil), 1<<20)); got != "accepted" {
		t.Fatalf("owner policy: %s", got)
	}

	b := dialAMQP(t, n)
	b.raw(amqp1.HeaderSASL[:])
	b.header()
	b.fr.ReadFrame()
	b.send(amqp1.TypeSASL, amqp1.Perf(amqp1.CodeSASLInit, amqp1.Symbol("PLAIN"), []byte("\x00owner\x00"+bad)), nil)
	f, _ := b.fr.ReadFrame()
	_, fields, _, _ := amqp1.Performative(f.Body)
	if o, _ := amqp1.Uint(fields, 0); o != 1 {
		t.Fatalf("sasl-outcome %d for a bad token, want 1", o)
	}
	if _, err := b.fr.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("after a failed SASL: %v", err)
	}
}

// TestHubAMQPBadInput: what is not AMQP gets the AMQP header and a
// close; broken frames after the open get a close with the condition
// that names the fault; the hub goes on serving.
func TestHubAMQPBadInput(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))

	for _, hdr := range []string{"AMQP\x01\x01\x00\x0a", "GET / HT"} {
		a := dialAMQP(t, n)
		a.raw([]byte(hdr))
		if a.header() != amqp1.HeaderAMQP {
			t.Fatalf("%q: not answered with the AMQP header", hdr)
		}
		if _, err := a.nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("%q: connection not closed: %v", hdr, err)
		}
	}
	broken := []struct {
		name  string
		frame []byte
		cond  amqp1.Symbol
	}{
		{"garbage body", []byte{0, 0, 0, 12, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, amqp1.CondDecodeError},
		{"frame over max-frame-size", []byte{0, 0x10, 0, 0, 2, 0, 0, 0}, amqp1.CondDecodeError},
		{"data offset past the frame", []byte{0, 0, 0, 8, 9, 0, 0, 0}, amqp1.CondDecodeError},
		{"transfer on no link", amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeTransfer, uint32(7), uint32(0)), nil), amqp1.CondNotAllowed},
		{"second begin", amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeBegin, nil, uint32(0), uint32(1), uint32(1)), nil), amqp1.CondNotAllowed},
		{"attach handle over handle-max", amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeAttach, "x", uint32(1000), false), nil), amqp1.CondInvalidField},
		{"sasl frame after open", amqp1.AppendFrame(nil, amqp1.TypeSASL, 0, amqp1.Perf(amqp1.CodeSASLInit, amqp1.Symbol("PLAIN")), nil), amqp1.CondFramingError},
	}
	for _, b := range broken {
		a := dialAMQP(t, n)
		a.connect("ANONYMOUS", "")
		a.raw(b.frame)
		t.Run(b.name, func(t *testing.T) { a.t = t; a.closed(b.cond) })
	}
	// Still serving.
	a := dialAMQP(t, n)
	a.connect("ANONYMOUS", "")
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeClose), nil)
	a.expect(amqp1.CodeClose)
}

// TestHubAMQPPartialBound: deliveries split over frames hold at most
// 4 MiB of a connection's memory together; past that the connection is
// closed with amqp:resource-limit-exceeded. Before a put-token nothing
// sent to /messages/devicebound is kept at all.
func TestHubAMQPPartialBound(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))
	tok := ownerToken(t)
	a := dialAMQP(t, n)
	a.connect("PLAIN", tok)
	const links = amqpHandleMax + 1
	for h := range uint32(links) {
		a.attachSender(h, c2dAddress)
	}
	chunk := make([]byte, 60000)
	for h := range uint32(links) {
		a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeTransfer, h, uint32(0), []byte{0}, uint32(0), false, true), chunk)
	}
	for h := range uint32(links) {
		a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeTransfer, h, nil, nil, nil, nil, true), chunk[:19000])
		if 60000*links+19000*int(h+1) > amqpMaxPartial {
			break
		}
	}
	a.closed(amqp1.CondResourceLimit)
}

// TestHubAMQPFeedback: messages sent with iothub-ack full and completed
// by the device give feedback records on a feedback link, as JSON
// arrays, only as far as the link's credit goes, one batch at a time
// until it is settled; a receiver connection that goes without giving
// credit leaves them to the next one.
func TestHubAMQPFeedback(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))
	dev, d := onlineC2DDevice(t, n, "lamp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, mid := range []string{"f-1", "f-2", "f-3"} {
		ack := "full"
		if mid == "f-2" {
			ack = "none" // no feedback asked
		}
		if err := n.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: []byte("x"), MessageID: mid,
			Properties: []Property{{"iothub-ack", ack}}}); err != nil {
			t.Fatal(err)
		}
		d.expect() // and its PUBACK
	}
	tok := ownerToken(t)
	attach := func(a *amqpClient) {
		a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeAttach, "fb", uint32(0), amqp1.RoleReceiver, nil, nil,
			amqp1.Perf(amqp1.CodeSource, "/messages/serviceBound/feedback"), amqp1.Perf(amqp1.CodeTarget, "me")), nil)
		if at := a.expect(amqp1.CodeAttach); amqp1.Field(at, 5) == nil {
			t.Fatalf("feedback attach refused: %v", at)
		}
	}
	// A receiver without credit takes the records from the topic but
	// cannot send them; it goes.
	a := dialAMQP(t, n)
	a.connect("PLAIN", tok)
	attach(a)
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeClose), nil)
	a.expect(amqp1.CodeClose)

	b := dialAMQP(t, n)
	b.connect("PLAIN", tok)
	attach(b)
	got := map[string]map[string]any{}
	for credit := uint32(1); len(got) < 2; credit++ {
		b.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeFlow, uint32(0), uint32(1000), uint32(0), uint32(1000), uint32(0), uint32(credit-1), uint32(1)), nil)
		id, _, recs := b.feedbackBatchIn(0)
		for _, r := range recs {
			got[r["originalMessageId"].(string)] = r
		}
		b.settle(id, amqp1.CodeAccepted) // the next batch waits for it
	}
	if got["f-1"] == nil || got["f-3"] == nil || got["f-2"] != nil || len(got) != 2 {
		t.Fatalf("feedback for %v", got)
	}
	if r := got["f-1"]; r["deviceId"] != "lamp" || r["statusCode"] != "Success" || r["deviceGenerationId"] != dev.GenerationID {
		t.Fatalf("record %v", r)
	}
}
