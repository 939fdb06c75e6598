package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// testBroker starts a broker on a free loopback port over dir, with small
// files and short delay levels.
func testBroker(t testing.TB, dir string, mod func(*Options)) *Broker {
	t.Helper()
	b, err := New(testBrokerOptions(dir, mod))
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// testBrokerOptions are testBroker's options.
func testBrokerOptions(dir string, mod func(*Options)) Options {
	so := store.DefaultOptions(dir)
	so.SegmentSize = 1 << 20
	so.CQEntriesPerFile = 1000
	so.IndexSlots = 1000
	so.IndexEntries = 4000
	so.WarmSegments = false
	so.MaxMessageSize = 256 << 10
	opts := Options{
		BrokerName: "broker-t", ClusterName: "TestCluster", ListenAddr: "127.0.0.1:0",
		AutoCreateTopic: true, AutoCreateGroup: true, LongPolling: true,
		DelayLevels: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond},
		Store:       so,
	}
	if mod != nil {
		mod(&opts)
	}
	return opts
}

type testClient struct {
	t    testing.TB
	c    *remoting.Client
	addr string
}

func newTestClient(t testing.TB, addr string) *testClient {
	t.Helper()
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &testClient{t: t, c: c, addr: addr}
}

func (tc *testClient) invoke(code int32, hdr protocol.HeaderEncoder, body []byte) *protocol.Command {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tc.c.Invoke(ctx, tc.addr, protocol.NewRequest(code, hdr, body))
	if err != nil {
		tc.t.Fatalf("invoke %d: %v", code, err)
	}
	return resp
}

func props(kv ...string) string {
	var p record.Properties
	for i := 0; i+1 < len(kv); i += 2 {
		p.Set(kv[i], kv[i+1])
	}
	return p.String()
}

// send sends one message with SEND_MESSAGE_V2 and returns the response.
func (tc *testClient) send(topic string, queueID int32, body string, properties string) *protocol.Command {
	tc.t.Helper()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: queueID, BornTimestamp: time.Now().UnixMilli(), Properties: properties}
	return tc.invoke(protocol.SendMessageV2, h.V2(), []byte(body))
}

func (tc *testClient) mustSend(topic string, queueID int32, body string, properties string) protocol.SendMessageResponseHeader {
	tc.t.Helper()
	resp := tc.send(topic, queueID, body, properties)
	if resp.Code != protocol.Success {
		tc.t.Fatalf("send to %s: code %d %s", topic, resp.Code, resp.Remark)
	}
	var h protocol.SendMessageResponseHeader
	if err := resp.DecodeHeader(&h); err != nil {
		tc.t.Fatal(err)
	}
	return h
}

func (tc *testClient) heartbeat(clientID, group string, model string, subs map[string]string) {
	tc.t.Helper()
	cd := &protocol.ConsumerData{GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: model, ConsumeFromWhere: protocol.ConsumeFromFirstOffset}
	for topic, expr := range subs {
		sd := &protocol.SubscriptionData{Topic: topic, SubString: expr, ExpressionType: "TAG", SubVersion: 1}
		for _, tag := range parseTags(expr) {
			sd.TagsSet = append(sd.TagsSet, tag)
			sd.CodeSet = append(sd.CodeSet, int32(record.TagsHash(tag)))
		}
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, sd)
	}
	body, err := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []*protocol.ConsumerData{cd}})
	if err != nil {
		tc.t.Fatal(err)
	}
	if resp := tc.invoke(protocol.HeartBeat, nil, body); resp.Code != protocol.Success {
		tc.t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
}

type pullResult struct {
	code int32
	hdr  protocol.PullMessageResponseHeader
	msgs []*record.Message
}

func (tc *testClient) pull(group, topic string, queueID int32, offset int64, sysFlag int32, suspend time.Duration, sub string) pullResult {
	tc.t.Helper()
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: queueID, QueueOffset: offset,
		MaxMsgNums: 32, SysFlag: sysFlag, SuspendTimeoutMillis: suspend.Milliseconds(), Subscription: sub, ExpressionType: "TAG"}
	resp := tc.invoke(protocol.PullMessage, h, nil)
	r := pullResult{code: resp.Code}
	switch resp.Code {
	case protocol.Success, protocol.PullNotFound, protocol.PullRetryImmediately, protocol.PullOffsetMoved:
	default:
		return r
	}
	if err := resp.DecodeHeader(&r.hdr); err != nil {
		tc.t.Fatalf("pull response header: %v (code %d %s)", err, resp.Code, resp.Remark)
	}
	body := resp.Body
	for len(body) > 0 {
		m, n, err := record.Decode(body, true)
		if err != nil {
			tc.t.Fatalf("decode pulled record: %v", err)
		}
		r.msgs = append(r.msgs, m)
		body = body[n:]
	}
	return r
}

func propOf(m *record.Message, key string) string {
	v, _ := record.LookupPropertyString(m.Properties, key)
	return v
}

func itoa(n int) string { return strconv.Itoa(n) }

type remotingConn = remoting.Conn

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// waitDispatched waits until the store dispatched n messages into the
// queue (dispatch follows the commitlog asynchronously).
func waitDispatched(t *testing.T, b *Broker, topic string, queueID int32, n int64) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return b.Store().MaxOffset(topic, queueID) >= n })
}
