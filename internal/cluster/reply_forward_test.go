package cluster

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// peer is a raw remoting connection that speaks frames as a client
// library would, so a test sees exactly what a broker sends.
type peer struct {
	t      testing.TB
	nc     net.Conn
	opaque int32
}

func dialPeer(t testing.TB, addr string) *peer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &peer{t: t, nc: nc}
}

// send writes a request (or a response) and returns its opaque.
func (p *peer) send(c *protocol.Command) int32 {
	p.t.Helper()
	if !c.IsResponse() {
		p.opaque++
		c.Opaque = p.opaque
	}
	frame, err := protocol.EncodeFrame(c)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.nc.Write(frame); err != nil {
		p.t.Fatal(err)
	}
	return c.Opaque
}

// read returns the next frame (within 20 s).
func (p *peer) read() *protocol.Command {
	p.t.Helper()
	_ = p.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	c, _, err := protocol.ReadFrame(p.nc, nil, 0)
	if err != nil {
		p.t.Fatalf("read from %s: %v", p.nc.RemoteAddr(), err)
	}
	return c
}

// call sends a request and returns its response.
func (p *peer) call(c *protocol.Command) *protocol.Command {
	p.t.Helper()
	opaque := p.send(c)
	resp := p.read()
	if !resp.IsResponse() || resp.Opaque != opaque {
		p.t.Fatalf("answer to %s: %s", c, resp)
	}
	return resp
}

// replyProps are the properties of a reply to client's request corr.
func replyProps(client, corr, ttl string) string {
	var p record.Properties
	p.Set(record.PropertyCorrelationID, corr)
	p.Set(record.PropertyReplyToClient, client)
	p.Set(record.PropertyTTL, ttl)
	p.Set(record.PropertyMsgType, protocol.ReplyMessageFlag)
	p.Set(record.PropertyCluster, "TestCluster")
	return p.String()
}

// sendReply is a responder's SEND_REPLY_MESSAGE (324) of body for the
// requester client.
func sendReply(p *peer, client, corr, ttl, body string) int32 {
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "responders", Topic: protocol.ReplyTopic("TestCluster"),
		DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: -1, BornTimestamp: time.Now().UnixMilli(),
		Properties: replyProps(client, corr, ttl)}
	return p.send(protocol.NewRequest(protocol.SendReplyMessage, h, []byte(body)))
}

// takePush reads a push of the reply body on the requester's connection
// and answers it with code.
func takePush(t testing.TB, p *peer, body string, code int32) *protocol.ReplyMessageRequestHeader {
	t.Helper()
	push := p.read()
	if push.Code != protocol.PushReplyMessageToClient || string(push.Body) != body {
		t.Fatalf("expected the push of %q, got %s body %q", body, push, push.Body)
	}
	var h protocol.ReplyMessageRequestHeader
	if err := push.DecodeHeader(&h); err != nil {
		t.Fatalf("push header: %v", err)
	}
	resp := protocol.NewResponse(code, "")
	resp.Opaque = push.Opaque
	p.send(resp)
	return &h
}

// A reply that lands on a broker the requester is not connected to is
// handed to the broker that has it, across a cluster of three masters:
// broker-c asks broker-a (which does not have the requester) and then
// broker-b, which pushes it. The reply is stored once, on broker-c. A
// requester nobody has gets SYSTEM_ERROR naming every broker asked; a
// push the requester refuses is reported with its code; a forwarded reply
// is never forwarded again (broker-a answers "not found" although
// broker-b has the requester); a push nobody answers ends within the
// reply's TTL; a malformed forward is refused.
func TestClusterReplyForwardedToRequestersBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: t.TempDir(), Brokers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	a, b, cc := c.Broker(0).Addr(), c.Broker(1).Addr(), c.Broker(2).Addr()

	// The requester heartbeats broker-b only.
	const requester = "127.0.0.1@requester#1"
	req := dialPeer(t, b)
	hb, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: requester,
		ProducerDataSet: []*protocol.ProducerData{{GroupName: "requesters"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp := req.call(protocol.NewRequest(protocol.HeartBeat, nil, hb)); resp.Code != protocol.Success {
		t.Fatalf("heartbeat: %s", resp)
	}

	// The responder answers through broker-c.
	resp := dialPeer(t, cc)
	opaque := sendReply(resp, requester, "corr-1", "3000", "answer-1")
	ph := takePush(t, req, "answer-1", protocol.Success)
	props, err := record.ParseProperties(ph.Properties)
	if err != nil {
		t.Fatal(err)
	}
	if corr, _ := props.Get(record.PropertyCorrelationID); corr != "corr-1" || ph.StoreHost != cc ||
		ph.BornHost != resp.nc.LocalAddr().String() || ph.Topic != protocol.ReplyTopic("TestCluster") {
		t.Fatalf("forwarded push header %+v", ph)
	}
	if _, ok := props.Get(record.PropertyPushReplyTime); !ok {
		t.Fatalf("forwarded push without %s: %q", record.PropertyPushReplyTime, ph.Properties)
	}
	out := resp.read()
	var sh protocol.SendMessageResponseHeader
	if out.Opaque != opaque || out.Code != protocol.Success || out.DecodeHeader(&sh) != nil || sh.MsgID == "0" {
		t.Fatalf("responder answered %s %+v", out, sh)
	}
	// Stored once, on broker-c. The queue's max offset counts what the
	// store's dispatcher has indexed, which may trail the answer.
	testutil.WaitFor(t, 10*time.Second, "the reply in broker-c's queue", func() bool {
		return queueMax(t, cc, protocol.ReplyTopic("TestCluster")) == 1
	})
	for i, addr := range []string{a, b, cc} {
		want := int64(0)
		if addr == cc {
			want = 1
		}
		if got := queueMax(t, addr, protocol.ReplyTopic("TestCluster")); got != want {
			t.Errorf("broker %d holds %d replies, want %d", i, got, want)
		}
	}

	// A requester no broker has: SYSTEM_ERROR, as a Java broker answers
	// when the requester's channel is unknown, naming the brokers asked.
	opaque = sendReply(resp, "127.0.0.1@ghost#1", "corr-2", "3000", "answer-2")
	if out := resp.read(); out.Opaque != opaque || out.Code != protocol.SystemError ||
		!strings.Contains(out.Remark, "not connected") || !strings.Contains(out.Remark, "2 other master brokers") {
		t.Fatalf("reply to nobody answered %s", out)
	}

	// The requester refuses the push: the responder hears why.
	opaque = sendReply(resp, requester, "corr-3", "3000", "answer-3")
	takePush(t, req, "answer-3", protocol.SystemError)
	if out := resp.read(); out.Opaque != opaque || out.Code != protocol.SystemError ||
		!strings.Contains(out.Remark, "answered the pushed reply with code 1") {
		t.Fatalf("refused push answered %s", out)
	}

	// A forwarded reply goes one hop: broker-a does not have the
	// requester and does not hand it to broker-b, which has.
	fh := &protocol.ForwardReplyHeader{ReplyMessageRequestHeader: *ph, PushTimeoutMillis: 3000}
	fh.Properties = replyProps(requester, "corr-4", "3000")
	fwd := dialPeer(t, a)
	if out := fwd.call(protocol.NewRequest(protocol.ForwardReplyMessage, fh, []byte("answer-4"))); out.Code != protocol.QueryNotFound ||
		!strings.Contains(out.Remark, requester) {
		t.Fatalf("forward to a broker without the requester answered %s", out)
	}
	// Nothing reached the requester: its next frame is the next reply.
	opaque = sendReply(resp, requester, "corr-5", "3000", "answer-5")
	takePush(t, req, "answer-5", protocol.Success)
	if out := resp.read(); out.Opaque != opaque || out.Code != protocol.Success {
		t.Fatalf("reply 5 answered %s", out)
	}
	// Sent straight to broker-b, a forward is pushed.
	fh.Properties = replyProps(requester, "corr-6", "3000")
	fwdB := dialPeer(t, b)
	opaque = fwdB.send(protocol.NewRequest(protocol.ForwardReplyMessage, fh, []byte("answer-6")))
	takePush(t, req, "answer-6", protocol.Success)
	if out := fwdB.read(); out.Opaque != opaque || out.Code != protocol.Success {
		t.Fatalf("forward to the requester's broker answered %s", out)
	}
	// The requester does not answer the push: the forward gives up
	// within the reply's TTL (1: rocketmq-client-go writes seconds).
	opaque = sendReply(resp, requester, "corr-8", "1", "answer-8")
	if push := req.read(); push.Code != protocol.PushReplyMessageToClient || string(push.Body) != "answer-8" {
		t.Fatalf("expected the push of answer-8, got %s", push)
	}
	if out := resp.read(); out.Opaque != opaque || out.Code != protocol.SystemError || !strings.Contains(out.Remark, "timed out") {
		t.Fatalf("unanswered push answered %s", out)
	}
	// A malformed forward: a clear error, nothing pushed.
	bad := protocol.NewRequest(protocol.ForwardReplyMessage, &fh.ReplyMessageRequestHeader, []byte("answer-7"))
	if out := fwdB.call(bad); out.Code != protocol.SystemError || !strings.Contains(out.Remark, "pushTimeoutMillis") {
		t.Fatalf("forward without a timeout answered %s", out)
	}
}

// queueMax is GET_MAX_OFFSET of queue 0 of topic on a broker.
func queueMax(t testing.TB, addr, topic string) int64 {
	t.Helper()
	p := dialPeer(t, addr)
	out := p.call(protocol.NewRequest(protocol.GetMaxOffset, &protocol.GetMaxOffsetRequestHeader{Topic: topic}, nil))
	var h protocol.GetMaxOffsetResponseHeader
	if out.Code != protocol.Success || out.DecodeHeader(&h) != nil {
		t.Fatalf("max offset of %s on %s: %s", topic, addr, out)
	}
	return h.Offset
}

// BenchmarkClusterReplyForward: the responder's round trip (send the
// reply, the requester takes the push, the responder's answer) when the
// reply reaches the requester's broker (direct) and when it reaches the
// other broker, which forwards it (forwarded), interleaved in one run;
// reports both means and their ratio.
func BenchmarkClusterReplyForward(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: b.TempDir(), Brokers: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	const requester = "127.0.0.1@bench#1"
	req := dialPeer(b, c.Broker(1).Addr())
	hb, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: requester,
		ProducerDataSet: []*protocol.ProducerData{{GroupName: "requesters"}}})
	if err != nil {
		b.Fatal(err)
	}
	if resp := req.call(protocol.NewRequest(protocol.HeartBeat, nil, hb)); resp.Code != protocol.Success {
		b.Fatalf("heartbeat: %s", resp)
	}
	direct, forwarded := dialPeer(b, c.Broker(1).Addr()), dialPeer(b, c.Broker(0).Addr())
	roundTrip := func(resp *peer, corr string) time.Duration {
		start := time.Now()
		opaque := sendReply(resp, requester, corr, "3000", corr)
		takePush(b, req, corr, protocol.Success)
		if out := resp.read(); out.Opaque != opaque || out.Code != protocol.Success {
			b.Fatalf("reply %s answered %s", corr, out)
		}
		return time.Since(start)
	}
	roundTrip(forwarded, "warm") // dials broker-1, fetches the cluster
	var dSum, fSum time.Duration
	b.ResetTimer()
	for i := range b.N {
		dSum += roundTrip(direct, "d"+strconv.Itoa(i))
		fSum += roundTrip(forwarded, "f"+strconv.Itoa(i))
	}
	b.ReportMetric(float64(dSum.Microseconds())/float64(b.N), "direct-us")
	b.ReportMetric(float64(fSum.Microseconds())/float64(b.N), "forwarded-us")
	b.ReportMetric(float64(fSum)/float64(dSum), "forwarded/direct")
}
