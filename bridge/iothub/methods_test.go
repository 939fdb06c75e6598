package iothub

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// answerMethods serves direct methods on d until it returns: each request
// is answered with status 200 and {"echo": <payload>, "method": name}.
func answerMethods(t testing.TB, d *device, n int) {
	for range n {
		p := d.expect()
		name := strings.TrimPrefix(p.Topic, methodPostTopicBase)
		name, _, _ = strings.Cut(name, "/")
		rid, ok := topicQuery(p.Topic, "$rid")
		if !ok {
			t.Errorf("method request without $rid: %q", p.Topic)
			return
		}
		body, _ := json.Marshal(map[string]any{"echo": json.RawMessage(p.Payload), "method": name})
		d.Send(&packets.Publish{Topic: "$iothub/methods/res/200/?$rid=" + rid, Payload: body})
	}
}

// TestHubMethodsAcrossNodes: the back end on one node calls a method of a
// device connected to another; the device's answer comes back. A device
// that is not connected, not subscribed, or does not answer in time gets
// 404, 404 and 504.
func TestHubMethodsAcrossNodes(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	dev := createDevice(t, a, "pump")
	id := Identity{DeviceID: "pump"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	d.subscribe(methodPostFilter)
	waitFor(t, 10*time.Second, "registered as connected", func() bool { return twinDoc(t, a, id)["connectionState"] == "Connected" })
	done := make(chan struct{})
	go func() {
		defer close(done)
		answerMethods(t, d, 1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.hub.InvokeMethod(ctx, id, MethodCall{Name: "reboot", Payload: json.RawMessage(`{"delay":3}`), ResponseTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if res.Status != 200 || string(res.Payload) != `{"echo":{"delay":3},"method":"reboot"}` {
		t.Fatalf("result %d %s", res.Status, res.Payload)
	}
	// Same node: delivered directly.
	go answerMethods(t, d, 1)
	if res, err := a.hub.InvokeMethod(ctx, id, MethodCall{Name: "ping"}); err != nil || res.Status != 200 {
		t.Fatalf("local call: %+v %v", res, err)
	}
	// No answer: 504 after the response timeout.
	start := time.Now()
	_, err = b.hub.InvokeMethod(ctx, id, MethodCall{Name: "slow", ResponseTimeout: time.Second})
	if !errors.Is(err, ErrMethodTimeout) || time.Since(start) < time.Second {
		t.Fatalf("timeout: %v after %v", err, time.Since(start))
	}
	d.expect() // the unanswered request
	// Not subscribed to methods: 404 at once.
	other := createDevice(t, a, "mute")
	oid := Identity{DeviceID: "mute"}
	dialDevice(t, a.addr, oid, deviceToken(t, oid, other.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	waitFor(t, 10*time.Second, "mute registered as connected", func() bool { return twinDoc(t, a, oid)["connectionState"] == "Connected" })
	if _, err := b.hub.InvokeMethod(ctx, oid, MethodCall{Name: "x"}); !errors.Is(err, ErrDeviceNotOnline) ||
		!strings.Contains(err.Error(), "not subscribed") {
		t.Fatalf("unsubscribed device: %v", err)
	}
	// Not connected: 404 at once, not after the 2 s ack timeout (the
	// bound is the timeout itself: a stall under load is not a wait).
	d.Send(&packets.Disconnect{})
	d.Closed()
	waitFor(t, 10*time.Second, "registered as disconnected", func() bool { return twinDoc(t, a, id)["connectionState"] == "Disconnected" })
	start = time.Now()
	if _, err := b.hub.InvokeMethod(ctx, id, MethodCall{Name: "x"}); !errors.Is(err, ErrDeviceNotOnline) || time.Since(start) >= 2*time.Second {
		t.Fatalf("offline device: %v after %v", err, time.Since(start))
	}
	if _, err := b.hub.InvokeMethod(ctx, id, MethodCall{Name: "a/b"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad name: %v", err)
	}
}

// methodOutcome is what InvokeMethod returned.
type methodOutcome struct {
	res MethodResult
	err error
}

// invokeLater calls method name of id through n's hub on a goroutine, with
// 10 s to connect and 10 s to answer, and delivers the outcome.
func invokeLater(n *node, id Identity, name string) <-chan methodOutcome {
	got := make(chan methodOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := n.hub.InvokeMethod(ctx, id, MethodCall{Name: name, ConnectTimeout: 10 * time.Second, ResponseTimeout: 10 * time.Second})
		got <- methodOutcome{r, err}
	}()
	return got
}

// TestHubMethodConnectTimeout: a call with a connect timeout waits for the
// device to come online (on another node) and is delivered then.
func TestHubMethodConnectTimeout(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	dev := createDevice(t, a, "late")
	id := Identity{DeviceID: "late"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	first := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	first.subscribe(methodPostFilter)
	first.Send(&packets.Disconnect{})
	first.Closed()
	got := invokeLater(b, id, "wake")
	waitFor(t, 10*time.Second, "the call started", func() bool { return b.hub.Stats().MethodCalls.Load() == 1 })
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	answerMethods(t, d, 1)
	r := <-got
	if r.err != nil || r.res.Status != 200 {
		t.Fatalf("%+v %v", r.res, r.err)
	}
}

// TestHubMethodAnsweredAfterReconnect: a device that receives a method
// request and drops its connection before acknowledging it gets the
// request again when it resumes its session (QoS 1), and its answer then
// still reaches the caller: the call delivered to the lost connection is
// not forgotten at the disconnect, only at its deadline.
func TestHubMethodAnsweredAfterReconnect(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	dev := createDevice(t, a, "flaky")
	id := Identity{DeviceID: "flaky"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	first := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	first.subscribe(methodPostFilter)
	got := invokeLater(b, id, "reboot")
	p := first.Recv() // not acknowledged
	if pub, ok := p.(*packets.Publish); !ok || !strings.HasPrefix(pub.Topic, methodPostTopicBase+"reboot/") {
		t.Fatalf("want the method request, got %T %+v", p, p)
	}
	first.Send(&packets.Disconnect{})
	first.Closed()
	waitFor(t, 10*time.Second, "the first connection gone", func() bool { return !a.br.Server().Connected(id.ClientID()) })
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	answerMethods(t, d, 1)
	r := <-got
	if r.err != nil || r.res.Status != 200 {
		t.Fatalf("%+v %v", r.res, r.err)
	}
}

// TestHubMethodOfflineAtOnce: a method call to a device connected to no
// node answers 404 at once when the call gives no connect timeout (IoT
// Hub's 404103 body through the HTTPS API, on a node the device never
// used), and only after the connect timeout when it gives one. A device
// that connects within the connect timeout with a new session, and
// subscribes to methods only then, still gets the call.
func TestHubMethodOfflineAtOnce(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c, withHTTPS(t))
	dev := createDevice(t, a, "sleeper")
	id := Identity{DeviceID: "sleeper"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	api := newAPI(t, b, "owner")
	for _, body := range []string{`{"methodName":"wake","responseTimeoutInSeconds":30}`,
		`{"methodName":"wake","responseTimeoutInSeconds":30,"connectTimeoutInSeconds":0}`} {
		start := time.Now()
		st, hdr, resp := api.do("POST", "/twins/sleeper/methods?api-version=2021-04-12", []byte(body), nil)
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: answered after %v", body, took)
		}
		if st != 404 || hdr.Get("iothub-errorcode") != "DeviceNotOnline" || errorCode(t, resp) != "404103" {
			t.Fatalf("%s: %d %v %s", body, st, hdr, resp)
		}
		var outer struct{ Message string }
		var inner struct {
			Info         struct{ Timeout string }
			TimestampUtc string
			TrackingID   string
		}
		if json.Unmarshal(resp, &outer) != nil || json.Unmarshal([]byte(outer.Message), &inner) != nil ||
			inner.Info.Timeout != "00:00:00" || inner.TrackingID == "" || inner.TimestampUtc == "" {
			t.Fatalf("%s: body %s", body, resp)
		}
	}
	// A module of a device that is not connected: the same.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.hub.Twins().CreateModule(ctx, &twincli.Module{DeviceID: "sleeper", ModuleID: "m"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := a.hub.InvokeMethod(ctx, Identity{DeviceID: "sleeper", ModuleID: "m"}, MethodCall{Name: "x"}); !errors.Is(err, ErrDeviceNotOnline) ||
		time.Since(start) >= 2*time.Second { // at once, not after the 2 s ack timeout
		t.Fatalf("module: %v after %v", err, time.Since(start))
	}

	// With a connect timeout, 404 comes after it.
	start = time.Now()
	st, _, resp := api.do("POST", "/twins/sleeper/methods", []byte(`{"methodName":"wake","connectTimeoutInSeconds":2}`), nil)
	if took := time.Since(start); st != 404 || errorCode(t, resp) != "404103" || took < 2*time.Second || !strings.Contains(string(resp), `00:00:02`) {
		t.Fatalf("connect timeout 2 s: %d %s after %v", st, resp, took)
	}

	// The device connects (clean session: no subscription yet) while the
	// call waits, then subscribes: it gets the call.
	calls := b.hub.Stats().MethodCalls.Load()
	got := invokeLater(b, id, "wake")
	waitFor(t, 10*time.Second, "the call started", func() bool { return b.hub.Stats().MethodCalls.Load() == calls+1 })
	cp := connectCP(id, deviceToken(t, id, key, time.Hour))
	cp.CleanStart = true
	d := dialDeviceCP(t, a.addr, id, cp)
	d.subscribe(methodPostFilter)
	answerMethods(t, d, 1)
	if r := <-got; r.err != nil || r.res.Status != 200 {
		t.Fatalf("%+v %v", r.res, r.err)
	}
}

// TestHubMethodPayloadLimit: a direct method call over HTTPS whose
// payload is over IoT Hub's 128 KB gets 413 RequestEntityTooLarge and
// never reaches the device; one of exactly 128 KB is delivered. The large
// one was delivered.
func TestHubMethodPayloadLimit(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withHTTPS(t))
	dev := createDevice(t, n, "big-m")
	id := Identity{DeviceID: "big-m"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.subscribe(methodPostFilter)
	waitFor(t, 10*time.Second, "registered as connected", func() bool { return twinDoc(t, n, id)["connectionState"] == "Connected" })
	a := newAPI(t, n, "owner")
	payload := func(size int) string { // a JSON string of size bytes, quotes included
		return `"` + strings.Repeat("p", size-2) + `"`
	}
	call := func(size int) (int, []byte) {
		body := `{"methodName":"load","responseTimeoutInSeconds":20,"payload":` + payload(size) + `}`
		st, _, b := a.do("POST", "/twins/big-m/methods", []byte(body), nil)
		return st, b
	}
	if st, b := call(MaxMethodPayload + 1); st != 413 || !strings.Contains(string(b), "RequestEntityTooLarge") {
		t.Fatalf("payload over 128 KB: %d %s", st, b)
	}
	go func() { // answers with the size of the request's payload
		p := d.expect()
		rid, _ := topicQuery(p.Topic, "$rid")
		d.Send(&packets.Publish{Topic: "$iothub/methods/res/200/?$rid=" + rid, Payload: []byte(strconv.Itoa(len(p.Payload)))})
	}()
	st, b := call(MaxMethodPayload)
	if st != 200 {
		t.Fatalf("payload of 128 KB: %d %.200s", st, b)
	}
	var res struct{ Status, Payload int }
	// The device saw the 128 KB call only: the larger one, had it been
	// delivered, would have been answered first.
	if err := json.Unmarshal(b, &res); err != nil || res.Status != 200 || res.Payload != MaxMethodPayload {
		t.Fatalf("payload of 128 KB: %v %s", err, b)
	}
}

// TestHubMethodResponseTooLarge: a device's answer over IoT Hub's 128 KB
// fails the call with ErrResponseTooLarge as soon as it comes, on the
// device's node and across nodes (the RPC result carries the size, not
// the payload); an answer of exactly 128 KB is returned. The large
// answers used to be returned whole.
func TestHubMethodResponseTooLarge(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	dev := createDevice(t, a, "chatty")
	id := Identity{DeviceID: "chatty"}
	d := dialDevice(t, a.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.subscribe(methodPostFilter)
	waitFor(t, 10*time.Second, "registered as connected", func() bool { return twinDoc(t, a, id)["connectionState"] == "Connected" })
	answer := func(size int) {
		p := d.expect()
		rid, ok := topicQuery(p.Topic, "$rid")
		if !ok {
			t.Errorf("method request without $rid: %q", p.Topic)
			return
		}
		body := `"` + strings.Repeat("r", size-2) + `"` // a JSON string of size bytes
		d.Send(&packets.Publish{Topic: "$iothub/methods/res/200/?$rid=" + rid, Payload: []byte(body)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range []*node{a, b} {
		go answer(MaxMethodPayload + 1)
		_, err := n.hub.InvokeMethod(ctx, id, MethodCall{Name: "dump", ResponseTimeout: 30 * time.Second})
		if !errors.Is(err, ErrResponseTooLarge) || !strings.Contains(err.Error(), strconv.Itoa(MaxMethodPayload+1)) {
			t.Fatalf("answer over 128 KB: %v", err)
		}
		go answer(MaxMethodPayload)
		res, err := n.hub.InvokeMethod(ctx, id, MethodCall{Name: "dump", ResponseTimeout: 30 * time.Second})
		if err != nil || res.Status != 200 || len(res.Payload) != MaxMethodPayload {
			t.Fatalf("answer of 128 KB: %v, %d bytes", err, len(res.Payload))
		}
	}
}
