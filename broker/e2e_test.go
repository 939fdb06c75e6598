package broker

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/obs"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

const flagSubscription = pullFlagSubscription

func TestBrokerProduceConsumeRoundTrip(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	var ids []string
	for i := 0; i < 10; i++ {
		h := c.mustSend("Orders", 1, "body-"+itoa(i), props(record.PropertyTags, "TagA", record.PropertyKeys, "k"+itoa(i)+" common", "user", "u"+itoa(i)))
		if h.QueueID != 1 || h.QueueOffset != int64(i) {
			t.Fatalf("send %d: queue %d offset %d", i, h.QueueID, h.QueueOffset)
		}
		host, phy, err := record.ParseOffsetMessageID(h.MsgID)
		if err != nil || host.String() != b.Addr() {
			t.Fatalf("msgId %s: host %v (broker %s) %v", h.MsgID, host, b.Addr(), err)
		}
		_ = phy
		ids = append(ids, h.MsgID)
	}
	// The topic was auto-created from TBW102 with 4 queues.
	tc, ok := b.Topics().Get("Orders")
	if !ok || tc.WriteQueueNums != 4 {
		t.Fatalf("auto-created topic %+v %v", tc, ok)
	}
	waitDispatched(t, b, "Orders", 1, 10)
	r := c.pull("cg", "Orders", 1, 0, flagSubscription, 0, "*")
	if r.code != protocol.Success || len(r.msgs) != 10 {
		t.Fatalf("pull: code %d, %d msgs", r.code, len(r.msgs))
	}
	if r.hdr.NextBeginOffset != 10 || r.hdr.MaxOffset != 10 || r.hdr.MinOffset != 0 {
		t.Fatalf("pull header %+v", r.hdr)
	}
	for i, m := range r.msgs {
		if string(m.Body) != "body-"+itoa(i) || m.Topic != "Orders" || m.QueueID != 1 || m.QueueOffset != int64(i) {
			t.Fatalf("msg %d: %+v", i, m)
		}
		if propOf(m, record.PropertyTags) != "TagA" || propOf(m, "user") != "u"+itoa(i) || propOf(m, record.PropertyCluster) != "TestCluster" {
			t.Fatalf("msg %d properties %q", i, m.Properties)
		}
		if m.BornHost.Addr().String() != "127.0.0.1" {
			t.Fatalf("born host %v", m.BornHost)
		}
	}
	// Pulling at the end answers PULL_NOT_FOUND without suspension.
	if r := c.pull("cg", "Orders", 1, 10, flagSubscription, 0, "*"); r.code != protocol.PullNotFound || r.hdr.NextBeginOffset != 10 {
		t.Fatalf("pull at end: %d %+v", r.code, r.hdr)
	}
	// Offset beyond the end: PULL_OFFSET_MOVED.
	if r := c.pull("cg", "Orders", 1, 99, flagSubscription, 0, "*"); r.code != protocol.PullOffsetMoved {
		t.Fatalf("pull beyond end: %d", r.code)
	}
	// Lookup by key and by offset id.
	resp := c.invoke(protocol.QueryMessage, &protocol.QueryMessageRequestHeader{Topic: "Orders", Key: "k3", MaxNum: 10, BeginTimestamp: 0, EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}, nil)
	if resp.Code != protocol.Success {
		t.Fatalf("query by key: %d %s", resp.Code, resp.Remark)
	}
	m, _, err := record.Decode(resp.Body, true)
	if err != nil || string(m.Body) != "body-3" {
		t.Fatalf("query by key got %v %v", m, err)
	}
	_, phy, _ := record.ParseOffsetMessageID(ids[5])
	resp = c.invoke(protocol.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: phy}, nil)
	if m, _, err := record.Decode(resp.Body, true); resp.Code != protocol.Success || err != nil || string(m.Body) != "body-5" {
		t.Fatalf("view by id: %d %v", resp.Code, err)
	}
}

func TestBrokerTagFilterAndHeartbeatSubscription(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 6; i++ {
		tag := []string{"TagA", "TagB", "TagC"}[i%3]
		c.mustSend("Tagged", 0, tag+"-"+itoa(i), props(record.PropertyTags, tag))
	}
	// Subscription from the request.
	waitDispatched(t, b, "Tagged", 0, 6)
	r := c.pull("g1", "Tagged", 0, 0, flagSubscription, 0, "TagA || TagC")
	if r.code != protocol.Success || len(r.msgs) != 4 {
		t.Fatalf("filtered pull: %d, %d msgs", r.code, len(r.msgs))
	}
	for _, m := range r.msgs {
		if tag := propOf(m, record.PropertyTags); tag != "TagA" && tag != "TagC" {
			t.Fatalf("got tag %s", tag)
		}
	}
	// Without the subscription flag the broker needs the heartbeat's.
	if r := c.pull("g2", "Tagged", 0, 0, 0, 0, ""); r.code != protocol.SubscriptionNotExist {
		t.Fatalf("pull without heartbeat: %d", r.code)
	}
	c.heartbeat("10.0.0.9@1", "g2", protocol.MessageModelClustering, map[string]string{"Tagged": "TagB"})
	r = c.pull("g2", "Tagged", 0, 0, 0, 0, "")
	if r.code != protocol.Success || len(r.msgs) != 2 || propOf(r.msgs[0], record.PropertyTags) != "TagB" {
		t.Fatalf("heartbeat-subscription pull: %d %d", r.code, len(r.msgs))
	}
	// The heartbeat created the group's retry topic.
	if _, ok := b.Topics().Get("%RETRY%g2"); !ok {
		t.Fatal("retry topic not created on heartbeat")
	}
	resp := c.invoke(protocol.GetConsumerListByGroup, &protocol.ConsumerGroupHeader{ConsumerGroup: "g2"}, nil)
	var list protocol.ConsumerIDList
	if err := protocol.DecodeJSON(resp.Body, &list); err != nil || len(list.ConsumerIDList) != 1 || list.ConsumerIDList[0] != "10.0.0.9@1" {
		t.Fatalf("consumer list %v %v", list, err)
	}
}

// A held pull is answered within milliseconds of the put that satisfies it.
func TestBrokerLongPollWakeUp(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	c.mustSend("LP", 0, "first", "")
	type res struct {
		r  pullResult
		at time.Time
	}
	got := make(chan res, 1)
	go func() {
		r := c.pull("lpg", "LP", 0, 1, flagSubscription|pullFlagSuspend, 10*time.Second, "*")
		got <- res{r, time.Now()}
	}()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return b.hold.Len() == 1 })
	sent := time.Now()
	c.mustSend("LP", 0, "second", "")
	select {
	case g := <-got:
		if g.r.code != protocol.Success || len(g.r.msgs) != 1 || string(g.r.msgs[0].Body) != "second" {
			t.Fatalf("held pull answered %d with %d msgs", g.r.code, len(g.r.msgs))
		}
		lat := g.at.Sub(sent)
		t.Logf("long-poll wake-up latency: %v", lat)
		if lat > time.Second {
			t.Fatalf("held pull answered %v after the put", lat)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held pull not answered after the put")
	}
	// A held pull with nothing arriving times out with PULL_NOT_FOUND.
	start := time.Now()
	r := c.pull("lpg", "LP", 0, 2, flagSubscription|pullFlagSuspend, 300*time.Millisecond, "*")
	if r.code != protocol.PullNotFound || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("timed-out hold: code %d after %v", r.code, time.Since(start))
	}
}

func TestBrokerRetryThenDLQ(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	g := DefaultSubscriptionGroup("rg")
	g.RetryMaxTimes = 2
	body, _ := protocol.EncodeJSON(g)
	if resp := c.invoke(protocol.UpdateAndCreateSubscriptionGroup, nil, body); resp.Code != protocol.Success {
		t.Fatalf("create group: %d %s", resp.Code, resp.Remark)
	}
	h := c.mustSend("Work", 0, "payload", props(record.PropertyTags, "T1", record.PropertyKeys, "job-1"))
	_, phy, _ := record.ParseOffsetMessageID(h.MsgID)
	offset := phy
	// Each failure goes to %RETRY%rg with delay level 3 + reconsumeTimes
	// (levels here are 150 ms, 200 ms); after retryMaxTimes it goes to %DLQ%rg.
	for attempt := 0; attempt < 3; attempt++ {
		resp := c.invoke(protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{Offset: offset, Group: "rg", OriginMsgID: h.MsgID}, nil)
		if resp.Code != protocol.Success {
			t.Fatalf("send back %d: %d %s", attempt, resp.Code, resp.Remark)
		}
		if attempt == 2 {
			break
		}
		var r pullResult
		testutil.WaitFor(t, 5*time.Second, "", func() bool {
			r = c.pull("rg", "%RETRY%rg", 0, int64(attempt), flagSubscription, 0, "*")
			return r.code == protocol.Success
		})
		m := r.msgs[0]
		if m.ReconsumeTimes != int32(attempt+1) || string(m.Body) != "payload" || propOf(m, record.PropertyRetryTopic) != "Work" || propOf(m, record.PropertyKeys) != "job-1" {
			t.Fatalf("retry %d: reconsume %d props %q", attempt, m.ReconsumeTimes, m.Properties)
		}
		if propOf(m, record.PropertyOriginMessageID) != h.MsgID {
			t.Fatalf("origin id %q, want %s", propOf(m, record.PropertyOriginMessageID), h.MsgID)
		}
		offset = m.PhysicalOffset
	}
	var r pullResult
	testutil.WaitFor(t, 5*time.Second, "", func() bool {
		if _, ok := b.Topics().Get("%DLQ%rg"); !ok {
			return false
		}
		r = c.pull("dlq-reader", "%DLQ%rg", 0, 0, flagSubscription, 0, "*")
		return r.code == protocol.Success
	})
	if len(r.msgs) != 1 || string(r.msgs[0].Body) != "payload" || r.msgs[0].ReconsumeTimes != 3 {
		t.Fatalf("DLQ got %d msgs %+v", len(r.msgs), r.msgs)
	}
}

func TestBrokerDelayLevels(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	sent := time.Now()
	h := c.mustSend("Later", 2, "delayed", props(record.PropertyDelayLevel, "4", record.PropertyTags, "D")) // 200 ms
	if h.QueueID != 2 {
		t.Fatalf("response queue %d", h.QueueID)
	}
	// Not visible at once (a pull that began after the delay was up, on a
	// busy machine, may see it).
	asked := time.Now()
	if r := c.pull("dg", "Later", 2, 0, flagSubscription, 0, "*"); r.code == protocol.Success && asked.Sub(sent) < 180*time.Millisecond {
		t.Fatalf("delayed message visible %v after its send", asked.Sub(sent))
	}
	var r pullResult
	testutil.WaitFor(t, 5*time.Second, "", func() bool {
		r = c.pull("dg", "Later", 2, 0, flagSubscription, 0, "*")
		return r.code == protocol.Success
	})
	if waited := time.Since(sent); waited < 180*time.Millisecond {
		t.Fatalf("delivered after %v, before the 200 ms delay", waited)
	}
	m := r.msgs[0]
	if string(m.Body) != "delayed" || m.Topic != "Later" || m.QueueID != 2 || propOf(m, record.PropertyRealTopic) != "Later" {
		t.Fatalf("redelivered %+v props %q", m, m.Properties)
	}
	if _, ok := record.LookupPropertyString(m.Properties, record.PropertyDelayLevel); ok {
		t.Fatal("DELAY property kept on the delivered message")
	}
	// Progress is saved: after a restart the message is not delivered twice.
	dir := b.opts.Store.Root
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := testBroker(t, dir, nil)
	time.Sleep(300 * time.Millisecond)
	c2 := newTestClient(t, b2.Addr())
	if r := c2.pull("dg", "Later", 2, 1, flagSubscription, 0, "*"); r.code == protocol.Success {
		t.Fatalf("delayed message delivered again after restart: %d msgs", len(r.msgs))
	}
}

func TestBrokerOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 5; i++ {
		c.mustSend("Off", 0, "m", "")
	}
	// A fresh group on a young queue starts at 0.
	resp := c.invoke(protocol.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: "og", Topic: "Off", QueueID: 0}, nil)
	var oh protocol.OffsetResponseHeader
	if resp.Code != protocol.Success || resp.DecodeHeader(&oh) != nil || oh.Offset != 0 {
		t.Fatalf("fresh group offset: %d %s %+v", resp.Code, resp.Remark, oh)
	}
	c.invoke(protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: "og", Topic: "Off", QueueID: 0, CommitOffset: 3}, nil)
	// A pull can carry a commit too.
	c.pull("og", "Off", 1, 0, flagSubscription|pullFlagCommitOffset, 0, "*")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := testBroker(t, dir, nil)
	c2 := newTestClient(t, b2.Addr())
	resp = c2.invoke(protocol.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: "og", Topic: "Off", QueueID: 0}, nil)
	if resp.Code != protocol.Success || resp.DecodeHeader(&oh) != nil || oh.Offset != 3 {
		t.Fatalf("offset after restart: %d %+v", resp.Code, oh)
	}
	// Messages survived too.
	if r := c2.pull("og", "Off", 0, 3, flagSubscription, 0, "*"); r.code != protocol.Success || len(r.msgs) != 2 {
		t.Fatalf("pull after restart: %d %d", r.code, len(r.msgs))
	}
	resp = c2.invoke(protocol.GetMaxOffset, &protocol.TopicQueueHeader{Topic: "Off", QueueID: 0}, nil)
	if resp.DecodeHeader(&oh) != nil || oh.Offset != 5 {
		t.Fatalf("max offset %+v", oh)
	}
}

func TestBrokerOrderlyLocks(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	lock := func(client string, ids ...int32) []int32 {
		body := protocol.LockBatchRequestBody{ConsumerGroup: "og", ClientID: client}
		for _, id := range ids {
			body.MQSet = append(body.MQSet, &protocol.MessageQueue{Topic: "Seq", BrokerName: "broker-t", QueueID: id})
		}
		raw, _ := protocol.EncodeJSON(body)
		resp := c.invoke(protocol.LockBatchMQ, nil, raw)
		var out protocol.LockBatchResponseBody
		if err := protocol.DecodeJSON(resp.Body, &out); err != nil {
			t.Fatalf("lock response: %v", err)
		}
		var got []int32
		for _, q := range out.LockOKMQSet {
			got = append(got, q.QueueID)
		}
		return got
	}
	if got := lock("c1", 0, 1); len(got) != 2 {
		t.Fatalf("c1 locked %v", got)
	}
	if got := lock("c2", 1, 2); len(got) != 1 || got[0] != 2 {
		t.Fatalf("c2 locked %v", got)
	}
	raw, _ := protocol.EncodeJSON(protocol.LockBatchRequestBody{ConsumerGroup: "og", ClientID: "c1", MQSet: []*protocol.MessageQueue{{Topic: "Seq", BrokerName: "broker-t", QueueID: 1}}})
	c.invoke(protocol.UnlockBatchMQ, nil, raw)
	if got := lock("c2", 1); len(got) != 1 {
		t.Fatalf("c2 after unlock %v", got)
	}
}

func TestBrokerPermissionAndAutoCreateErrors(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.AutoCreateTopic = false })
	c := newTestClient(t, b.Addr())
	if resp := c.send("Nope", 0, "x", ""); resp.Code != protocol.TopicNotExist || !strings.Contains(resp.Remark, "Nope") {
		t.Fatalf("unknown topic with auto-create off: %d %s", resp.Code, resp.Remark)
	}
	create := func(topic string, perm int32) {
		resp := c.invoke(protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: topic, DefaultTopic: AutoCreateTopicKey,
			ReadQueueNums: 2, WriteQueueNums: 2, Perm: perm, TopicFilterType: protocol.TopicFilterSingleTag}, nil)
		if resp.Code != protocol.Success {
			t.Fatalf("create %s: %d %s", topic, resp.Code, resp.Remark)
		}
	}
	create("ReadOnly", PermRead)
	if resp := c.send("ReadOnly", 0, "x", ""); resp.Code != protocol.NoPermission {
		t.Fatalf("send to read-only topic: %d %s", resp.Code, resp.Remark)
	}
	create("WriteOnly", PermWrite)
	c.mustSend("WriteOnly", 0, "x", "")
	if r := c.pull("g", "WriteOnly", 0, 0, flagSubscription, 0, "*"); r.code != protocol.NoPermission {
		t.Fatalf("pull from write-only topic: %d", r.code)
	}
	if resp := c.send("WriteOnly", 7, "x", ""); resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "queueId[7]") {
		t.Fatalf("bad queue id: %d %s", resp.Code, resp.Remark)
	}
	if resp := c.send("bad topic!", 0, "x", ""); resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "bad topic!") {
		t.Fatalf("bad topic name: %d %s", resp.Code, resp.Remark)
	}
	if resp := c.send(ScheduleTopic, 0, "x", ""); resp.Code != protocol.NoPermission {
		t.Fatalf("send to schedule topic: %d %s", resp.Code, resp.Remark)
	}
	// Deleting a topic removes it.
	if resp := c.invoke(protocol.DeleteTopicInBroker, &protocol.DeleteTopicRequestHeader{Topic: "WriteOnly"}, nil); resp.Code != protocol.Success {
		t.Fatalf("delete: %d %s", resp.Code, resp.Remark)
	}
	if _, ok := b.Topics().Get("WriteOnly"); ok {
		t.Fatal("deleted topic remains")
	}
}

// Every malformed request gets an error response naming what was wrong.
func TestBrokerBadRequests(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	cases := []struct {
		name string
		code int32
		hdr  protocol.ExtFields
		body []byte
		want int32
		text string
	}{
		{"send without topic", protocol.SendMessage, protocol.ExtFields{"producerGroup": "p"}, []byte("x"), protocol.SystemError, "topic"},
		{"send bad number", protocol.SendMessageV2, protocol.ExtFields{"a": "p", "b": "T", "c": "TBW102", "d": "4", "e": "zero", "f": "0", "g": "0", "h": "0"}, []byte("x"), protocol.SystemError, "e"},
		{"pull without offset", protocol.PullMessage, protocol.ExtFields{"consumerGroup": "g", "topic": "T"}, nil, protocol.SystemError, "queueId"},
		{"heartbeat bad json", protocol.HeartBeat, nil, []byte("{not json"), protocol.SystemError, "heartbeat"},
		{"batch bad body", protocol.SendBatchMessage, protocol.ExtFields{"a": "p", "b": "Batchy", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "m": "true"}, []byte{0, 0, 0, 99, 1}, protocol.MessageIllegal, "batch"},
		{"lock bad json", protocol.LockBatchMQ, nil, []byte("["), protocol.SystemError, "lock"},
		{"unknown code", 9999, nil, nil, protocol.RequestCodeNotSupported, "9999"},
		{"view missing offset", protocol.ViewMessageByID, protocol.ExtFields{"offset": "123456789"}, nil, protocol.SystemError, "offset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := protocol.NewRequest(tc.code, nil, tc.body)
			req.ExtFields = tc.hdr
			resp := c.invokeRaw(req)
			if resp.Code != tc.want || !strings.Contains(resp.Remark, tc.text) {
				t.Fatalf("code %d remark %q; want %d mentioning %q", resp.Code, resp.Remark, tc.want, tc.text)
			}
		})
	}
	// The broker still serves.
	c.mustSend("StillAlive", 0, "x", "")
}

func (tc *testClient) invokeRaw(req *protocol.Command) *protocol.Command {
	tc.t.Helper()
	ctx, cancel := contextTimeout(10 * time.Second)
	defer cancel()
	resp, err := tc.c.Invoke(ctx, tc.addr, req)
	if err != nil {
		tc.t.Fatal(err)
	}
	return resp
}

func TestBrokerBatchSend(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	var body []byte
	for i := 0; i < 5; i++ {
		body = record.AppendBatchItem(body, 0, []byte("item-"+itoa(i)), props(record.PropertyUniqueClientMessageIDKeyIndex, "U"+itoa(i), record.PropertyTags, "B"))
	}
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "Batchy", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: 3, BornTimestamp: time.Now().UnixMilli(), Batch: true, Properties: props(record.PropertyWaitStoreMsgOK, "true")}
	resp := c.invoke(protocol.SendBatchMessage, h.V2(), body)
	var rh protocol.SendMessageResponseHeader
	if resp.Code != protocol.Success || resp.DecodeHeader(&rh) != nil {
		t.Fatalf("batch: %d %s", resp.Code, resp.Remark)
	}
	if ids := strings.Split(rh.MsgID, ","); len(ids) != 5 || rh.QueueOffset != 0 {
		t.Fatalf("batch ids %q offset %d", rh.MsgID, rh.QueueOffset)
	}
	waitDispatched(t, b, "Batchy", 3, 5)
	r := c.pull("bg", "Batchy", 3, 0, flagSubscription, 0, "*")
	if len(r.msgs) != 5 {
		t.Fatalf("pulled %d", len(r.msgs))
	}
	for i, m := range r.msgs {
		if string(m.Body) != "item-"+itoa(i) || propOf(m, record.PropertyUniqueClientMessageIDKeyIndex) != "U"+itoa(i) ||
			propOf(m, record.PropertyCluster) != "TestCluster" || hasProp(m, record.PropertyWaitStoreMsgOK) {
			t.Fatalf("item %d: %q %q", i, m.Body, m.Properties)
		}
	}
}

// A batch whose items ask for a delay level is refused whole
// (MESSAGE_ILLEGAL, nothing stored), not delivered at once; DELAY=0 is no
// delay.
func TestBrokerBatchWithDelayedItemRefused(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	send := func(delays ...string) *protocol.Command {
		var body []byte
		for i, d := range delays {
			kv := []string{record.PropertyUniqueClientMessageIDKeyIndex, "U" + itoa(i)}
			if d != "" {
				kv = append(kv, record.PropertyDelayLevel, d)
			}
			body = record.AppendBatchItem(body, 0, []byte("item-"+itoa(i)), props(kv...))
		}
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "BatchDelay", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 1,
			QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Batch: true}
		return c.invoke(protocol.SendBatchMessage, h.V2(), body)
	}
	for _, delays := range [][]string{{"", "2", ""}, {"3"}, {"", "x"}} {
		resp := send(delays...)
		if resp.Code != protocol.MessageIllegal || !strings.Contains(resp.Remark, "delay level") {
			t.Fatalf("batch with delays %q: code %d %q", delays, resp.Code, resp.Remark)
		}
	}
	if resp := send("0", ""); resp.Code != protocol.Success {
		t.Fatalf("batch with DELAY=0: code %d %q", resp.Code, resp.Remark)
	}
	waitDispatched(t, b, "BatchDelay", 0, 2)
	if n := b.Store().MaxOffset("BatchDelay", 0); n != 2 {
		t.Fatalf("queue holds %d messages, want the 2 of the accepted batch", n)
	}
	if n := b.Store().MaxOffset(ScheduleTopic, 1); n != 0 {
		t.Fatalf("schedule queue of level 2 holds %d messages", n)
	}
}

// Membership changes are pushed to the group's members.
func TestBrokerNotifiesConsumerIDsChanged(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	var mu sync.Mutex
	notified := map[string]int{}
	c1 := newTestClient(t, b.Addr())
	c1.c.RegisterFunc(protocol.NotifyConsumerIDsChanged, func(_ *remotingConn, req *protocol.Command) (*protocol.Command, error) {
		mu.Lock()
		notified[req.ExtFields["consumerGroup"]]++
		mu.Unlock()
		return nil, nil
	})
	c1.heartbeat("c1", "ng", protocol.MessageModelClustering, map[string]string{"N": "*"})
	c2 := newTestClient(t, b.Addr())
	c2.heartbeat("c2", "ng", protocol.MessageModelClustering, map[string]string{"N": "*"})
	testutil.WaitFor(t, 5*time.Second, "", func() bool { mu.Lock(); defer mu.Unlock(); return notified["ng"] >= 2 })
	// c2 goes away with its connection: c1 hears about it.
	mu.Lock()
	before := notified["ng"]
	mu.Unlock()
	_ = c2.c.Close()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { mu.Lock(); defer mu.Unlock(); return notified["ng"] > before })
	if ids := b.consumers.ClientIDs("ng"); len(ids) != 1 || ids[0] != "c1" {
		t.Fatalf("members after close: %v", ids)
	}
}

// Per-topic and per-group statistics reach GET_BROKER_RUNTIME_INFO and the
// Prometheus endpoint.
func TestBrokerStatisticsEndpoints(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	reg := obs.NewRegistry()
	reg.MustRegister(b.Collectors()...)
	var health obs.Health
	health.Add("broker", b.Ready)
	ms, err := obs.Serve("127.0.0.1:0", reg, &health, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	c := newTestClient(t, b.Addr())
	for i := 0; i < 3; i++ {
		c.mustSend("Counted", 0, "xyz", "")
	}
	waitDispatched(t, b, "Counted", 0, 3)
	if r := c.pull("statg", "Counted", 0, 0, flagSubscription, 0, "*"); len(r.msgs) != 3 {
		t.Fatalf("pulled %d", len(r.msgs))
	}
	resp := c.invoke(protocol.GetBrokerRuntimeInfo, nil, nil)
	var kv protocol.KVTable
	if err := protocol.DecodeJSON(resp.Body, &kv); err != nil {
		t.Fatal(err)
	}
	if kv.Table["topicPutTotal.Counted"] != "3" || kv.Table["groupGetTotal.Counted@statg"] != "3" || kv.Table["brokerRole"] != "ASYNC_MASTER" {
		t.Fatalf("runtime info: %v", kv.Table)
	}
	hr, err := http.Get("http://" + ms.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	text, _ := io.ReadAll(hr.Body)
	for _, want := range []string{`smartgo_topic_put_messages_total{topic="Counted"} 3`, `smartgo_group_get_messages_total{group="statg",topic="Counted"} 3`, "smartgo_commitlog_max_offset", "smartgo_index_lag_bytes",
		"smartgo_broker_send_latency_seconds_count 1", "smartgo_broker_pull_latency_seconds_count 1", "smartgo_store_disk_used_ratio",
		"smartgo_store_open_files", "smartgo_store_file_reopens_total", `smartgo_store_writes_refused{reason="disk-full"} 0`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
