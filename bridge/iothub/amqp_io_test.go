package iothub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/bridge/iothub/amqp1"
	"github.com/smartgo/smartgo/mqtt"
)

// attachFeedback attaches a feedback receiving link as handle h and gives
// it credit.
func (c *amqpClient) attachFeedback(h, credit uint32) {
	c.t.Helper()
	c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeAttach, "fb", h, amqp1.RoleReceiver, nil, nil,
		amqp1.Perf(amqp1.CodeSource, "/messages/serviceBound/feedback"), amqp1.Perf(amqp1.CodeTarget, "me")), nil)
	if at := c.expect(amqp1.CodeAttach); amqp1.Field(at, 5) == nil {
		c.t.Fatalf("feedback attach refused: %v", at)
	}
	if credit > 0 {
		c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeFlow, uint32(0), uint32(1000), uint32(0), uint32(1000), h, uint32(0), credit), nil)
	}
}

// feedbackBatchIn reads the next performative, which must be a transfer
// of a feedback batch on handle h, and returns its delivery id, whether
// the hub sent it settled, and the records' original message ids.
func (c *amqpClient) feedbackBatchIn(h uint32) (id uint32, settled bool, recs []map[string]any) {
	c.t.Helper()
	code, f, payload := c.next(false)
	if code != amqp1.CodeTransfer {
		c.t.Fatalf("want a feedback transfer, got %#x %v", code, f)
	}
	if got, _ := amqp1.Uint(f, 0); got != uint64(h) {
		c.t.Fatalf("transfer on handle %d, want %d", got, h)
	}
	did, _ := amqp1.Uint(f, 1)
	settled, _ = amqp1.Bool(f, 4)
	m, err := amqp1.DecodeMessage(payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if m.ContentType != feedbackContentType {
		c.t.Fatalf("content type %q", m.ContentType)
	}
	if err := json.Unmarshal(m.Data, &recs); err != nil || len(recs) == 0 {
		c.t.Fatalf("batch %q: %v", m.Data, err)
	}
	return uint32(did), settled, recs
}

// settle sends the client's disposition of the hub's delivery id.
func (c *amqpClient) settle(id uint32, outcome uint64) {
	c.t.Helper()
	c.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeDisposition, amqp1.RoleReceiver, id, nil, true, amqp1.Perf(outcome)), nil)
}

// sendWithFeedback sends a cloud-to-device message asking for full
// feedback and has the device complete it (its PUBACK): a feedback
// record follows.
func sendWithFeedback(t *testing.T, n *node, d *device, mid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: []byte("x"), MessageID: mid,
		Properties: []Property{{"iothub-ack", "full"}}}); err != nil {
		t.Fatal(err)
	}
	d.expect()
}

func ids(recs []map[string]any) map[string]bool {
	m := map[string]bool{}
	for _, r := range recs {
		m[r["originalMessageId"].(string)] = true
	}
	return m
}

// TestHubAMQPFeedbackWhileAStoreStalls: a connection whose
// cloud-to-device store is stalled (the store hook holds it for as long
// as the request timeout, two minutes here) still gets its feedback
// batches at once, and the stalled delivery is settled accepted once the
// store goes on. Before, the connection's goroutine held the lock the
// feedback pump needs for the whole store.
func TestHubAMQPFeedbackWhileAStoreStalls(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t), func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.RequestTimeout = 2 * time.Minute })
	_, d := onlineC2DDevice(t, n, "lamp")
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	hook := func(ctx context.Context) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	n.hub.amqp.storeHook.Store(&hook)

	a := dialAMQP(t, n)
	a.connect("PLAIN", ownerToken(t))
	a.attachFeedback(0, 10)
	a.attachSender(1, c2dAddress)
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeTransfer, uint32(1), uint32(0), []byte{0}, uint32(0), false, false),
		c2dBytes("/devices/lamp/messages/devicebound", "stalled", []byte("on"), nil))
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the store never started")
	}
	sendWithFeedback(t, n, d, "f-1")
	// The batch comes while the store is still held (the next frame is
	// the transfer, not the stalled delivery's disposition).
	id, _, recs := a.feedbackBatchIn(0)
	if !ids(recs)["f-1"] {
		t.Fatalf("batch %v", recs)
	}
	a.settle(id, amqp1.CodeAccepted)
	once.Do(func() { close(release) })
	f := a.expect(amqp1.CodeDisposition)
	if st, _ := amqp1.Field(f, 4).(*amqp1.Described); st == nil || outcome(st) != "accepted" {
		t.Fatalf("the stalled delivery: %v", f)
	}
	if p := d.expect(); string(p.Payload) != "on" {
		t.Fatalf("device got %q", p.Payload)
	}
}

// TestHubAMQPClientNotReading: a back end that sends frames asking for
// answers (flows with echo) and never reads them is closed (its answers
// pass the bound of what may wait for it, or a write to it takes over
// the write timeout); meanwhile another connection's sends are stored
// and settled as usual.
func TestHubAMQPClientNotReading(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))
	_, d := onlineC2DDevice(t, n, "lamp")

	y := dialAMQP(t, n)
	y.connect("ANONYMOUS", "")
	echo := amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeFlow, uint32(0), uint32(1000), uint32(0), uint32(1000),
		nil, nil, nil, nil, nil, true), nil)
	// Far more answers than the bound and the sockets' buffers hold.
	flood := make([]byte, 0, len(echo)*(8*amqpMaxQueued/len(echo)))
	for len(flood)+len(echo) <= cap(flood) {
		flood = append(flood, echo...)
	}
	flooded := make(chan error, 1)
	go func() {
		_, err := y.nc.Write(flood) // fails once the hub closes the connection
		flooded <- err
	}()

	z := dialAMQP(t, n)
	z.connect("PLAIN", ownerToken(t))
	z.attachSender(1, c2dAddress)
	for i := range uint32(5) {
		if st := z.transfer(1, i, c2dBytes("/devices/lamp/messages/devicebound", "", []byte{byte('a' + i)}, nil), 1<<20); outcome(st) != "accepted" {
			t.Fatalf("send %d while another client does not read: %s", i, outcome(st))
		}
		d.expect()
	}
	// The hub closed the flooding connection: the flood's write fails,
	// and what the hub wrote before ends in EOF (or a reset), not in the
	// read deadline.
	select {
	case err := <-flooded:
		if err == nil {
			t.Fatal("the hub read the whole flood without closing the connection")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the flood's write still blocks")
	}
	_ = y.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, err := io.Copy(io.Discard, y.nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection that does not read is still open: %v", err)
	}
}

// TestHubAMQPFeedbackSettlement: feedback batches go out unsettled and
// count as taken only once the client settles them accepted. A receiver
// connection that closes without settling leaves its batch to the next
// receiver; a batch whose link detaches unsettled comes again on the
// connection's other feedback link; a released batch comes again; an
// accepted one never does.
func TestHubAMQPFeedbackSettlement(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t))
	_, d := onlineC2DDevice(t, n, "lamp")
	sendWithFeedback(t, n, d, "f-1")
	tok := ownerToken(t)

	// A takes the batch and goes without settling it.
	a := dialAMQP(t, n)
	a.connect("PLAIN", tok)
	a.attachFeedback(0, 10)
	if _, settled, recs := a.feedbackBatchIn(0); settled || !ids(recs)["f-1"] {
		t.Fatalf("batch settled %v: %v", settled, recs)
	}
	a.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeClose), nil)
	a.expect(amqp1.CodeClose)

	// B gets it again; its link detaches without settling, its other
	// link gets it, releases it, gets it once more, accepts it.
	b := dialAMQP(t, n)
	b.connect("PLAIN", tok)
	b.attachFeedback(0, 10)
	_, _, recs := b.feedbackBatchIn(0)
	if !ids(recs)["f-1"] {
		t.Fatalf("the unsettled batch did not come to the next receiver: %v", recs)
	}
	b.attachFeedback(1, 10)
	b.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeDetach, uint32(0), true), nil)
	b.expect(amqp1.CodeDetach)
	id, _, recs := b.feedbackBatchIn(1)
	if !ids(recs)["f-1"] {
		t.Fatalf("after the detach: %v", recs)
	}
	b.settle(id, amqp1.CodeReleased)
	id2, _, recs := b.feedbackBatchIn(1)
	if !ids(recs)["f-1"] || id2 == id {
		t.Fatalf("after the release, delivery %d: %v", id2, recs)
	}
	b.settle(id2, amqp1.CodeAccepted)
	// The next record comes in a batch of its own (f-1 was committed
	// before it went out); B goes without settling it.
	sendWithFeedback(t, n, d, "f-2")
	if _, _, recs := b.feedbackBatchIn(1); !ids(recs)["f-2"] || ids(recs)["f-1"] {
		t.Fatalf("after the accept: %v", recs)
	}
	b.send(amqp1.TypeAMQP, amqp1.Perf(amqp1.CodeClose), nil)
	b.expect(amqp1.CodeClose)

	// C gets f-2 again and never f-1.
	cc := dialAMQP(t, n)
	cc.connect("PLAIN", tok)
	cc.attachFeedback(0, 10)
	if _, _, recs := cc.feedbackBatchIn(0); !ids(recs)["f-2"] || ids(recs)["f-1"] {
		t.Fatalf("the third receiver: %v", recs)
	}
}

// TestHubAMQPFeedbackLockExpires: a batch the receiver neither accepts nor
// rejects within the feedback lock duration (IoT Hub's lockDuration of
// its feedback queue; 1 s here) is taken back and sent again, as a new
// delivery, on the same link; a settlement of the expired delivery that
// comes late is ignored (the batch stays outstanding), and accepting the
// new delivery takes it: the next record comes alone.
func TestHubAMQPFeedbackLockExpires(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c, withAMQPS(t), func(_ *mqtt.Options, _ *bridge.Options, o *Options) {
		o.FeedbackLockDuration = time.Second
	})
	_, d := onlineC2DDevice(t, n, "lamp")
	sendWithFeedback(t, n, d, "f-1")
	a := dialAMQP(t, n)
	a.connect("PLAIN", ownerToken(t))
	a.attachFeedback(0, 10)
	start := time.Now()
	id1, _, recs := a.feedbackBatchIn(0)
	if !ids(recs)["f-1"] {
		t.Fatalf("first batch: %v", recs)
	}
	id2, _, recs := a.feedbackBatchIn(0)
	if !ids(recs)["f-1"] || id2 == id1 {
		t.Fatalf("after the lock expired, delivery %d (first %d): %v", id2, id1, recs)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("sent again after %v, before the lock duration", took)
	}
	a.settle(id1, amqp1.CodeAccepted) // late: ignored
	id3, _, recs := a.feedbackBatchIn(0)
	if !ids(recs)["f-1"] || id3 == id2 {
		t.Fatalf("after a late settlement of the expired delivery, delivery %d: %v", id3, recs)
	}
	a.settle(id3, amqp1.CodeAccepted)
	sendWithFeedback(t, n, d, "f-2")
	if _, _, recs := a.feedbackBatchIn(0); !ids(recs)["f-2"] || ids(recs)["f-1"] {
		t.Fatalf("after the accept: %v", recs)
	}
}
