package broker

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// consumerHello is the heartbeat of a consumer clientID of group on topic
// S, to write raw (stallPeer).
func consumerHello(t *testing.T, clientID, group string) *protocol.Command {
	t.Helper()
	cd := &protocol.ConsumerData{GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: protocol.MessageModelClustering,
		ConsumeFromWhere:    protocol.ConsumeFromFirstOffset,
		SubscriptionDataSet: []*protocol.SubscriptionData{{Topic: "S", SubString: "*", ExpressionType: "TAG", SubVersion: 1}}}
	body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []*protocol.ConsumerData{cd}})
	if err != nil {
		t.Fatal(err)
	}
	return protocol.NewRequest(protocol.HeartBeat, nil, body)
}

// TestBrokerAdminCallsToStalledClient: the admin requests the broker passes
// on to a client (mqadmin consumerStatus: GET_CONSUMER_RUNNING_INFO;
// queryMsgById: CONSUME_MESSAGE_DIRECTLY; getConsumerStatus:
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS) never wait for the socket of a
// client that stopped reading (its write queue full of answers to held
// pulls), which would take WriteTimeout (30 s): the admin is told at once
// that the client is not reading, and the group's status comes from the
// healthy member alone.
func TestBrokerAdminCallsToStalledClient(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	prod := newTestClient(t, b.Addr())
	prod.mustSend("S", 0, "first", "")
	direct := prod.mustSend("S", 1, "direct", "")
	status := clientGoVector(t, "consumer_status.json")
	healthy := newOnlineConsumer(t, b, "healthy", "G", map[string]string{"S": "*"})
	healthy.answer = func(req *protocol.Command) *protocol.Command {
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = status
		return resp
	}
	stalledConn := stallPeer(t, b, prod, consumerHello(t, "stalled", "G"), "G", func() {})
	testutil.WaitFor(t, 10*time.Second, "the stalled consumer registered", func() bool {
		_, ok := b.consumers.Client("G", "stalled")
		return ok
	})

	quick := func(code int32, fields map[string]string) *protocol.Command {
		t.Helper()
		start := time.Now()
		resp := javaInvoke(t, b.Addr(), code, fields, nil)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("request %d answered after %v: the broker waited for a client (answer %d %q %s; the stalled client's connection not reading: %v; the healthy one was asked %d times)",
				code, d, resp.Code, resp.Remark, resp.Body, stalledConn.NotReading(), len(healthy.received(protocol.GetConsumerStatusFromClient)))
		}
		return resp
	}
	resp := quick(protocol.GetConsumerRunningInfo, map[string]string{"consumerGroup": "G", "clientId": "stalled", "jstackEnable": "false"})
	if resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "not reading") {
		t.Fatalf("running info of the stalled client: %d %q, want SYSTEM_ERROR, not reading", resp.Code, resp.Remark)
	}
	resp = quick(protocol.ConsumeMessageDirectly, map[string]string{"consumerGroup": "G", "clientId": "stalled", "msgId": direct.MsgID})
	if resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "not reading") {
		t.Fatalf("consume directly on the stalled client: %d %q, want SYSTEM_ERROR, not reading", resp.Code, resp.Remark)
	}
	st := decodeBody[protocol.GetConsumerStatusBody](t, quick(protocol.InvokeBrokerToGetConsumerStatus,
		map[string]string{"topic": "S", "group": "G"}))
	if _, ok := st.ConsumerTable["healthy"]; !ok || len(st.ConsumerTable) != 1 {
		t.Fatalf("group status %+v, want the healthy member's alone", st.ConsumerTable)
	}
	// The healthy member is still called, and answers.
	resp = quick(protocol.GetConsumerRunningInfo, map[string]string{"consumerGroup": "G", "clientId": "healthy", "jstackEnable": "false"})
	if resp.Code != protocol.Success || string(resp.Body) != string(status) {
		t.Fatalf("running info of the healthy client: %d %q", resp.Code, resp.Remark)
	}
}

// TestBrokerAdminCallsHoldNoWorker: while a client takes its time to
// answer the calls the broker passes on to it (here: never), no worker
// waits for it. More such calls than the default pool has workers leave
// the pool's other requests served at once, and each reaches the client.
func TestBrokerAdminCallsHoldNoWorker(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	prod := newTestClient(t, b.Addr())
	prod.mustSend("S", 0, "first", "")
	silent := newOnlineConsumer(t, b, "silent", "G", map[string]string{"S": "*"}) // never answers
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	const calls = 8 // the default pool has 4 workers
	reqs := make([]*protocol.Command, calls)
	for i := range reqs {
		reqs[i] = protocol.NewRequest(protocol.GetConsumerRunningInfo, nil, nil)
		reqs[i].ExtFields = protocol.ExtFields{"consumerGroup": "G", "clientId": "silent", "jstackEnable": "false"}
		reqs[i].Opaque = int32(i + 1)
	}
	writeFrames(t, nc, reqs)
	testutil.WaitFor(t, 10*time.Second, "every call passed on to the client", func() bool {
		return len(silent.received(protocol.GetConsumerRunningInfo)) == calls
	})
	// A worker held by a call would wait callClientTimeout (10 s): the
	// bound is well under that, not the quick answer of an idle machine
	// (the race detector on a loaded machine can take seconds).
	start := time.Now()
	resp := javaInvoke(t, b.Addr(), protocol.GetMaxOffset, map[string]string{"topic": "S", "queueId": "0"}, nil)
	if d := time.Since(start); resp.Code != protocol.Success || d > callClientTimeout*7/10 {
		t.Fatalf("GET_MAX_OFFSET beside %d calls waiting for a client: %d %q after %v", calls, resp.Code, resp.Remark, d)
	}
}
