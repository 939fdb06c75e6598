package broker

import (
	"bytes"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Tests of the admin requests mqadmin 4.9.8 sends, each asked with the
// exact request shape mqadmin writes (javaInvoke: a raw JSON frame from a
// "JAVA" client, header fields under their Java names).

// onlineConsumer is a client connection that heartbeats as a consumer of
// group and records the broker's requests to it; answer, if set, answers
// them.
type onlineConsumer struct {
	*testClient
	mu     sync.Mutex
	got    []*protocol.Command
	answer func(req *protocol.Command) *protocol.Command
}

func newOnlineConsumer(t *testing.T, b *Broker, clientID, group string, subs map[string]string) *onlineConsumer {
	t.Helper()
	oc := &onlineConsumer{testClient: newTestClient(t, b.Addr())}
	for _, code := range []int32{protocol.ResetConsumerClientOffset, protocol.GetConsumerStatusFromClient,
		protocol.GetConsumerRunningInfo, protocol.ConsumeMessageDirectly} {
		oc.c.RegisterFunc(code, func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
			cp := *req
			cp.Body = bytes.Clone(req.Body)
			oc.mu.Lock()
			oc.got = append(oc.got, &cp)
			answer := oc.answer
			oc.mu.Unlock()
			if answer == nil || req.IsOneway() {
				return nil, nil
			}
			return answer(&cp), nil
		})
	}
	oc.heartbeat(clientID, group, protocol.MessageModelClustering, subs)
	return oc
}

func (oc *onlineConsumer) received(code int32) []*protocol.Command {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	var out []*protocol.Command
	for _, r := range oc.got {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

func decodeBody[T any](t *testing.T, resp *protocol.Command) T {
	t.Helper()
	var v T
	if resp.Code != protocol.Success {
		t.Fatalf("answer %d %s", resp.Code, resp.Remark)
	}
	if err := protocol.DecodeJSON(resp.Body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, resp.Body, err)
	}
	return v
}

func commitOffset(t *testing.T, c *testClient, group, topic string, q int32, off int64) {
	t.Helper()
	if resp := c.invoke(protocol.UpdateConsumerOffset, &protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group,
		Topic: topic, QueueID: q, CommitOffset: off}, nil); resp.Code != protocol.Success {
		t.Fatalf("commit: %d %s", resp.Code, resp.Remark)
	}
}

// queryMsgById and topicList ask QUERY_TOPIC_CONSUME_BY_WHO; newer tools
// ask QUERY_TOPICS_BY_CONSUMER and QUERY_SUBSCRIPTION_BY_CONSUMER.
func TestBrokerMQAdminWhoConsumes(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	c.mustSend("Who", 0, "x", "")
	newOnlineConsumer(t, b, "10.0.0.1@a", "online-g", map[string]string{"Who": "TagA || TagB"})
	commitOffset(t, c, "offset-g", "Who", 0, 1)
	commitOffset(t, c, "offset-g", "Other", 0, 1)

	gl := decodeBody[protocol.GroupList](t, javaInvoke(t, b.Addr(), protocol.QueryTopicConsumeByWho, map[string]string{"topic": "Who"}, nil))
	if !reflect.DeepEqual(gl.GroupList, []string{"offset-g", "online-g"}) {
		t.Fatalf("consume by who: %v", gl.GroupList)
	}
	if gl := decodeBody[protocol.GroupList](t, javaInvoke(t, b.Addr(), protocol.QueryTopicConsumeByWho, map[string]string{"topic": "Nobody"}, nil)); len(gl.GroupList) != 0 {
		t.Fatalf("consumers of an unread topic: %v", gl.GroupList)
	}
	tl := decodeBody[protocol.TopicList](t, javaInvoke(t, b.Addr(), protocol.QueryTopicsByConsumer, map[string]string{"group": "offset-g"}, nil))
	if !reflect.DeepEqual(tl.TopicList, []string{"Other", "Who"}) || tl.BrokerAddr != b.Addr() {
		t.Fatalf("topics by consumer: %+v", tl)
	}
	sub := decodeBody[protocol.QuerySubscriptionResponseBody](t, javaInvoke(t, b.Addr(), protocol.QuerySubscriptionByConsumer,
		map[string]string{"group": "online-g", "topic": "Who"}, nil))
	if sub.SubscriptionData == nil || sub.SubscriptionData.SubString != "TagA || TagB" || sub.Group != "online-g" || sub.Topic != "Who" {
		t.Fatalf("subscription: %+v", sub)
	}
	resp := javaInvoke(t, b.Addr(), protocol.QuerySubscriptionByConsumer, map[string]string{"group": "online-g", "topic": "Other"}, nil)
	if resp.Code != protocol.Success || string(resp.Body) != `{"group":"online-g","topic":"Other"}` {
		t.Fatalf("no subscription: %d %s", resp.Code, resp.Body)
	}
}

// mqadmin resetOffsetByTime: INVOKE_BROKER_TO_RESET_OFFSET moves the
// group's offsets to the first message at or after the time, tells the
// online clients with RESET_CONSUMER_CLIENT_OFFSET and commits them;
// without clients it answers CONSUMER_NOT_ONLINE so mqadmin falls back.
func TestBrokerMQAdminResetOffsetByTime(t *testing.T) {
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Now = clk.now })
	c := newTestClient(t, b.Addr())
	var times []int64
	for i := 0; i < 4; i++ {
		times = append(times, clk.now().UnixMilli())
		c.mustSend("Reset", 0, "m"+itoa(i), "")
		clk.advance(time.Second)
	}
	waitDispatched(t, b, "Reset", 0, 4)
	reset := func(ts int64, force bool) *protocol.Command {
		return javaInvoke(t, b.Addr(), protocol.InvokeBrokerToResetOffset, map[string]string{
			"topic": "Reset", "group": "rg", "timestamp": strconv.FormatInt(ts, 10), "isForce": strconv.FormatBool(force)}, nil)
	}
	if resp := reset(times[1], true); resp.Code != protocol.ConsumerNotOnline {
		t.Fatalf("no consumer online: %d %s", resp.Code, resp.Remark)
	}
	if resp := javaInvoke(t, b.Addr(), protocol.InvokeBrokerToResetOffset, map[string]string{
		"topic": "NoSuchTopic", "group": "rg", "timestamp": "0", "isForce": "true"}, nil); resp.Code != protocol.SystemError {
		t.Fatalf("unknown topic: %d %s", resp.Code, resp.Remark)
	}

	oc := newOnlineConsumer(t, b, "10.0.0.2@r", "rg", map[string]string{"Reset": "*"})
	commitOffset(t, c, "rg", "Reset", 0, 4)
	body := decodeBody[protocol.ResetOffsetBody](t, reset(times[1], true))
	queue0 := protocol.MessageQueue{Topic: "Reset", BrokerName: "broker-t", QueueID: 0}
	if len(body.OffsetTable) == 0 || body.OffsetTable[0].Queue != queue0 || body.OffsetTable[0].Value != 1 {
		t.Fatalf("reset table %+v", body.OffsetTable)
	}
	if off, _ := b.Offsets().Query("rg", "Reset", 0); off != 1 {
		t.Fatalf("committed offset after reset: %d", off)
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return len(oc.received(protocol.ResetConsumerClientOffset)) == 1 })
	notice := oc.received(protocol.ResetConsumerClientOffset)[0]
	var nh protocol.ResetOffsetRequestHeader
	if err := notice.DecodeHeader(&nh); err != nil || nh.Topic != "Reset" || nh.Group != "rg" || nh.Timestamp != times[1] || !notice.IsOneway() {
		t.Fatalf("client told %+v (%v), oneway %v", nh, err, notice.IsOneway())
	}
	var nb protocol.ResetOffsetBody
	if err := protocol.DecodeJSON(notice.Body, &nb); err != nil || len(nb.OffsetTable) == 0 || nb.OffsetTable[0].Value != 1 {
		t.Fatalf("client's table %s (%v)", notice.Body, err)
	}
	// Without isForce a reset never moves a group forward.
	commitOffset(t, c, "rg", "Reset", 0, 2)
	body = decodeBody[protocol.ResetOffsetBody](t, reset(times[3], false))
	if body.OffsetTable[0].Value != 2 {
		t.Fatalf("unforced reset forward: %+v", body.OffsetTable[0])
	}
	// skipAccumulatedMessage: timestamp -1 is the queue's end.
	body = decodeBody[protocol.ResetOffsetBody](t, reset(-1, true))
	if body.OffsetTable[0].Value != 4 {
		t.Fatalf("reset to the end: %+v", body.OffsetTable[0])
	}
}

// mqadmin consumerStatus / consumerConnection -s: GET_CONSUMER_RUNNING_INFO
// goes to the client and its answer (here the bytes rocketmq-client-go
// v2.1.2 answers with) comes back unchanged; getConsumerStatus:
// INVOKE_BROKER_TO_GET_CONSUMER_STATUS gathers GET_CONSUMER_STATUS_FROM_CLIENT
// answers; queryMsgById -g -d: CONSUME_MESSAGE_DIRECTLY carries the record.
func TestBrokerMQAdminCallsToClients(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	sent := c.mustSend("Direct", 0, "consume-me", props(record.PropertyTags, "TagD"))
	running := clientGoVector(t, "consumer_running_info.json")
	status := clientGoVector(t, "consumer_status.json")
	oc := newOnlineConsumer(t, b, "192.0.2.2@cap-cons", "cap-cg", map[string]string{"CapTopic": "*"})
	oc.answer = func(req *protocol.Command) *protocol.Command {
		resp := protocol.NewResponse(protocol.Success, "")
		switch req.Code {
		case protocol.GetConsumerRunningInfo:
			resp.Body = running
		case protocol.GetConsumerStatusFromClient:
			resp.Body = status
		case protocol.ConsumeMessageDirectly:
			resp.Body = []byte(`{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"","spentTimeMills":3}`)
		}
		return resp
	}

	resp := javaInvoke(t, b.Addr(), protocol.GetConsumerRunningInfo,
		map[string]string{"consumerGroup": "cap-cg", "clientId": "192.0.2.2@cap-cons", "jstackEnable": "false"}, nil)
	if resp.Code != protocol.Success || !bytes.Equal(resp.Body, running) {
		t.Fatalf("running info: %d %s, %d bytes", resp.Code, resp.Remark, len(resp.Body))
	}
	fwd := oc.received(protocol.GetConsumerRunningInfo)
	if len(fwd) != 1 || fwd[0].ExtFields["clientId"] != "192.0.2.2@cap-cons" || fwd[0].ExtFields["jstackEnable"] != "false" {
		t.Fatalf("forwarded %+v", fwd)
	}
	if resp := javaInvoke(t, b.Addr(), protocol.GetConsumerRunningInfo,
		map[string]string{"consumerGroup": "cap-cg", "clientId": "nobody", "jstackEnable": "false"}, nil); resp.Code != protocol.SystemError {
		t.Fatalf("unknown client: %d %s", resp.Code, resp.Remark)
	}

	st := decodeBody[protocol.GetConsumerStatusBody](t, javaInvoke(t, b.Addr(), protocol.InvokeBrokerToGetConsumerStatus,
		map[string]string{"topic": "CapTopic", "group": "cap-cg"}, nil))
	table := st.ConsumerTable["192.0.2.2@cap-cons"]
	if len(st.ConsumerTable) != 1 || len(table) != 8 || table[4].Value != 2 || table[4].Queue.QueueID != 4 {
		t.Fatalf("consumer status %+v", st)
	}
	if resp := javaInvoke(t, b.Addr(), protocol.InvokeBrokerToGetConsumerStatus,
		map[string]string{"topic": "CapTopic", "group": "nobody"}, nil); resp.Code != protocol.SystemError {
		t.Fatalf("status of an offline group: %d", resp.Code)
	}

	resp = javaInvoke(t, b.Addr(), protocol.ConsumeMessageDirectly,
		map[string]string{"consumerGroup": "cap-cg", "clientId": "192.0.2.2@cap-cons", "msgId": sent.MsgID}, nil)
	if resp.Code != protocol.Success || !bytes.Contains(resp.Body, []byte("CR_SUCCESS")) {
		t.Fatalf("consume directly: %d %s %s", resp.Code, resp.Remark, resp.Body)
	}
	direct := oc.received(protocol.ConsumeMessageDirectly)
	if len(direct) != 1 || direct[0].ExtFields["brokerName"] != "broker-t" || direct[0].ExtFields["msgId"] != sent.MsgID {
		t.Fatalf("direct request %+v", direct)
	}
	m, _, err := record.Decode(direct[0].Body, true)
	if err != nil || string(m.Body) != "consume-me" || propOf(m, record.PropertyTags) != "TagD" {
		t.Fatalf("direct body: %v %+v", err, m)
	}
}

// mqadmin brokerConsumeStats (GET_BROKER_CONSUME_STATS), cloneGroupOffset
// on the broker (CLONE_GROUP_OFFSET) and the consume time span.
func TestBrokerMQAdminConsumeStatsAndClone(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 5; i++ {
		c.mustSend("Stat", 0, "m"+itoa(i), "")
	}
	waitDispatched(t, b, "Stat", 0, 5)
	g := DefaultSubscriptionGroup("sg")
	body, _ := protocol.EncodeJSON(g)
	if resp := javaInvoke(t, b.Addr(), protocol.UpdateAndCreateSubscriptionGroup, nil, body); resp.Code != protocol.Success {
		t.Fatalf("create group: %d %s", resp.Code, resp.Remark)
	}
	commitOffset(t, c, "sg", "Stat", 0, 2)

	list := decodeBody[protocol.ConsumeStatsList](t, javaInvoke(t, b.Addr(), protocol.GetBrokerConsumeStats, map[string]string{"isOrder": "false"}, nil))
	var found *protocol.ConsumeStats
	for _, m := range list.ConsumeStatsList {
		if cs, ok := m["sg"]; ok && len(cs) == 1 {
			found = &cs[0]
		}
	}
	if found == nil || list.BrokerAddr != b.Addr() || list.TotalDiff != 3 || found.Lag() != 3 {
		t.Fatalf("broker consume stats %+v (sg %+v)", list, found)
	}
	if list := decodeBody[protocol.ConsumeStatsList](t, javaInvoke(t, b.Addr(), protocol.GetBrokerConsumeStats, map[string]string{"isOrder": "true"}, nil)); list.TotalDiff != 0 {
		t.Fatalf("ordered topics only: %+v", list)
	}

	if resp := javaInvoke(t, b.Addr(), protocol.CloneGroupOffset, map[string]string{"srcGroup": "sg", "destGroup": "copy", "topic": "Stat", "offline": "false"}, nil); resp.Code != protocol.Success {
		t.Fatalf("clone: %d %s", resp.Code, resp.Remark)
	}
	if off, ok := b.Offsets().Query("copy", "Stat", 0); !ok || off != 2 {
		t.Fatalf("cloned offset %d %v", off, ok)
	}

	span := decodeBody[protocol.QueryConsumeTimeSpanBody](t, javaInvoke(t, b.Addr(), protocol.QueryConsumeTimeSpan, map[string]string{"topic": "Stat", "group": "sg"}, nil))
	if len(span.ConsumeTimeSpanSet) != 4 {
		t.Fatalf("time spans %+v", span)
	}
	q0 := span.ConsumeTimeSpanSet[0]
	if q0.MessageQueue.QueueID != 0 || q0.MinTimeStamp == 0 || q0.MaxTimeStamp < q0.MinTimeStamp || q0.ConsumeTimeStamp < q0.MinTimeStamp || q0.DelayTime < 0 {
		t.Fatalf("queue 0 span %+v", q0)
	}
}

// mqadmin getBrokerConfig / updateBrokerConfig / exportConfigs.
func TestBrokerMQAdminBrokerConfig(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	resp := javaInvoke(t, b.Addr(), protocol.GetBrokerConfig, nil, nil)
	cfg, err := protocol.DecodeProperties(resp.Body)
	if resp.Code != protocol.Success || err != nil {
		t.Fatalf("get config: %d %v", resp.Code, err)
	}
	// exportConfigs copies these keys and fails on a missing one.
	for _, k := range []string{"brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
		"flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable", "traceOn",
		"traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup"} {
		if _, ok := cfg[k]; !ok {
			t.Errorf("broker config lacks %s", k)
		}
	}
	if cfg["brokerName"] != "broker-t" || cfg["brokerClusterName"] != "TestCluster" || cfg["brokerPermission"] != "6" ||
		cfg["messageDelayLevel"] != "50ms 100ms 150ms 200ms 250ms" || resp.ExtFields["version"] == "" {
		t.Fatalf("config %v, version %q", cfg, resp.ExtFields["version"])
	}

	update := func(kv map[string]string) *protocol.Command {
		return javaInvoke(t, b.Addr(), protocol.UpdateBrokerConfig, nil, protocol.EncodeProperties(kv))
	}
	if resp := update(map[string]string{"brokerPermission": "4", "slaveReadEnable": "true"}); resp.Code != protocol.Success {
		t.Fatalf("update: %d %s", resp.Code, resp.Remark)
	}
	if resp := c.send("Perm", 0, "x", ""); resp.Code != protocol.NoPermission {
		t.Fatalf("send to a read-only broker: %d %s", resp.Code, resp.Remark)
	}
	for _, bad := range []map[string]string{{"brokerPermission": "9"}, {"maxMessageSize": "1"}, {"noSuchKey": "1"}, {"slaveReadEnable": "maybe"}} {
		if resp := update(bad); resp.Code != protocol.SystemError || resp.Remark == "" {
			t.Errorf("update %v: %d %q", bad, resp.Code, resp.Remark)
		}
	}
	if resp := update(map[string]string{"brokerPermission": "6"}); resp.Code != protocol.Success {
		t.Fatal(resp.Remark)
	}
	c.mustSend("Perm", 0, "x", "")
	cfg, _ = protocol.DecodeProperties(javaInvoke(t, b.Addr(), protocol.GetBrokerConfig, nil, nil).Body)
	if cfg["slaveReadEnable"] != "true" || cfg["brokerPermission"] != "6" {
		t.Fatalf("config after updates %v", cfg)
	}
}

// mqadmin updateBrokerConfig -k autoCreateTopicEnable: off, a send to a
// new topic is refused and the template topic TBW102 is gone (so the
// registries stop routing producers to it); on again, both come back.
func TestBrokerMQAdminAutoCreateTopicAtRunTime(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	set := func(v string) {
		t.Helper()
		resp := javaInvoke(t, b.Addr(), protocol.UpdateBrokerConfig, nil, protocol.EncodeProperties(map[string]string{"autoCreateTopicEnable": v}))
		if resp.Code != protocol.Success {
			t.Fatalf("autoCreateTopicEnable=%s: %d %s", v, resp.Code, resp.Remark)
		}
		cfg, err := protocol.DecodeProperties(javaInvoke(t, b.Addr(), protocol.GetBrokerConfig, nil, nil).Body)
		if err != nil || cfg["autoCreateTopicEnable"] != v {
			t.Fatalf("config after autoCreateTopicEnable=%s: %v %v", v, cfg["autoCreateTopicEnable"], err)
		}
	}
	c.mustSend("BeforeOff", 0, "x", "")
	set("false")
	if resp := c.send("WhileOff", 0, "x", ""); resp.Code != protocol.TopicNotExist {
		t.Fatalf("send to a new topic with auto-creation off: %d %s", resp.Code, resp.Remark)
	}
	if _, ok := b.Topics().Get(AutoCreateTopicKey); ok {
		t.Fatal("TBW102 still there with auto-creation off")
	}
	c.mustSend("BeforeOff", 0, "y", "") // existing topics take messages
	set("false")                        // again: no change
	set("true")
	if tc, ok := b.Topics().Get(AutoCreateTopicKey); !ok || tc.Perm&PermInherit == 0 {
		t.Fatalf("TBW102 after auto-creation on: %+v %v", tc, ok)
	}
	c.mustSend("AfterOn", 0, "x", "")
}

// mqadmin deleteExpiredCommitLog, cleanExpiredCQ, cleanUnusedTopic and
// exportMetadata's system topic list.
func TestBrokerMQAdminCleanUps(t *testing.T) {
	clk := &manualClock{t: time.Now()}
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Now = clk.now })
	c := newTestClient(t, b.Addr())
	big := string(bytes.Repeat([]byte("x"), 100<<10))
	for i := 0; i < 8; i++ { // all in the first 1 MiB segment
		c.mustSend("Old", 0, big, "")
	}
	for i := 0; i < 4; i++ { // across the first and the second
		c.mustSend("Pad", 0, big, "")
	}
	c.mustSend("New", 0, "fresh", "")
	c.mustSend("Unused", 0, "u", "")
	testutil.WaitFor(t, 10*time.Second, "", func() bool {
		return b.Store().MaxOffset("New", 0) == 1 && b.Store().FlushedPhysicalOffset() == b.Store().MaxPhysicalOffset() &&
			b.Store().IndexedPhysicalOffset() == b.Store().MaxPhysicalOffset()
	})
	clk.advance(100 * time.Hour)
	if resp := javaInvoke(t, b.Addr(), protocol.DeleteExpiredCommitlog, nil, nil); resp.Code != protocol.Success {
		t.Fatalf("delete expired commitlog: %d %s", resp.Code, resp.Remark)
	}
	if b.Store().MinPhysicalOffset() == 0 {
		t.Fatal("no segment was deleted")
	}
	if resp := javaInvoke(t, b.Addr(), protocol.CleanExpiredConsumeQueue, nil, nil); resp.Code != protocol.Success {
		t.Fatalf("clean expired CQ: %d %s", resp.Code, resp.Remark)
	}
	has := func(topic string) bool {
		for _, tp := range b.Store().Topics() {
			if tp == topic {
				return true
			}
		}
		return false
	}
	if has("Old") || !has("New") || !has("Pad") {
		t.Fatalf("after cleanExpiredCQ: %v", b.Store().Topics())
	}

	if _, err := b.Topics().Delete("Unused"); err != nil {
		t.Fatal(err)
	}
	if resp := javaInvoke(t, b.Addr(), protocol.CleanUnusedTopic, nil, nil); resp.Code != protocol.Success {
		t.Fatalf("clean unused topic: %d %s", resp.Code, resp.Remark)
	}
	if has("Unused") || !has("New") || !has(ScheduleTopic) && b.Store().MaxOffset(ScheduleTopic, 0) > 0 {
		t.Fatalf("after cleanUnusedTopic: %v", b.Store().Topics())
	}

	tl := decodeBody[protocol.TopicList](t, javaInvoke(t, b.Addr(), protocol.GetSystemTopicListFromBroker, nil, nil))
	for _, want := range []string{"TBW102", "SCHEDULE_TOPIC_XXXX", "TestCluster", "broker-t", StateStoreTopic} {
		found := false
		for _, tp := range tl.TopicList {
			found = found || tp == want
		}
		if !found {
			t.Errorf("system topics %v lack %s", tl.TopicList, want)
		}
	}
}

// mqadmin statsAll (VIEW_BROKER_STATS_DATA), queryCq (QUERY_CONSUME_QUEUE),
// producer (GET_ALL_PRODUCER_INFO), deleteSubGroup -r, and the SQL92
// check Java consumers make.
func TestBrokerMQAdminStatsQueuesProducers(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 6; i++ {
		tag := []string{"TagA", "TagB"}[i%2]
		c.mustSend("Cq", 0, "m"+itoa(i), props(record.PropertyTags, tag))
	}
	waitDispatched(t, b, "Cq", 0, 6)

	sd := decodeBody[protocol.BrokerStatsData](t, javaInvoke(t, b.Addr(), protocol.ViewBrokerStatsData,
		map[string]string{"statsName": "TOPIC_PUT_NUMS", "statsKey": "Cq"}, nil))
	if sd.StatsMinute.Sum != 6 || sd.StatsHour.Sum != 6 || sd.StatsDay.Sum != 6 || sd.StatsMinute.Avgpt != 1 {
		t.Fatalf("stats %+v", sd)
	}
	if resp := javaInvoke(t, b.Addr(), protocol.ViewBrokerStatsData, map[string]string{"statsName": "TOPIC_PUT_NUMS", "statsKey": "None"}, nil); resp.Code != protocol.SystemError {
		t.Fatalf("unknown stats item: %d", resp.Code)
	}

	newOnlineConsumer(t, b, "10.0.0.3@q", "cqg", map[string]string{"Cq": "TagA"})
	cq := decodeBody[protocol.QueryConsumeQueueResponseBody](t, javaInvoke(t, b.Addr(), protocol.QueryConsumeQueue,
		map[string]string{"topic": "Cq", "queueId": "0", "index": "1", "count": "4", "consumerGroup": "cqg"}, nil))
	if cq.MaxQueueIndex != 6 || cq.MinQueueIndex != 0 || len(cq.QueueData) != 4 || cq.SubscriptionData == nil {
		t.Fatalf("consume queue %+v", cq)
	}
	for i, e := range cq.QueueData {
		wantTag := []string{"TagB", "TagA"}[i%2]
		if e.TagsCode != record.TagsHash(wantTag) || e.Eval != (wantTag == "TagA") || e.PhysicSize <= 0 {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if resp := javaInvoke(t, b.Addr(), protocol.QueryConsumeQueue, map[string]string{"topic": "Cq", "queueId": "9", "index": "0", "count": "1"}, nil); resp.Code != protocol.SystemError {
		t.Fatalf("missing queue: %d", resp.Code)
	}

	hb, _ := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: "10.0.0.4@p", ProducerDataSet: []*protocol.ProducerData{{GroupName: "pg-x"}}})
	if resp := c.invoke(protocol.HeartBeat, nil, hb); resp.Code != protocol.Success {
		t.Fatal(resp.Remark)
	}
	pt := decodeBody[protocol.ProducerTableInfo](t, javaInvoke(t, b.Addr(), protocol.GetAllProducerInfo, nil, nil))
	if ps := pt.Data["pg-x"]; len(ps) != 1 || ps[0].ClientID != "10.0.0.4@p" || ps[0].Language != "GO" || ps[0].RemoteIP == "" || ps[0].LastUpdateTimestamp == 0 {
		t.Fatalf("producers %+v", pt)
	}

	commitOffset(t, c, "cqg", "Cq", 0, 3)
	if resp := javaInvoke(t, b.Addr(), protocol.DeleteSubscriptionGroup, map[string]string{"groupName": "cqg", "removeOffset": "true"}, nil); resp.Code != protocol.Success {
		t.Fatalf("delete group: %d %s", resp.Code, resp.Remark)
	}
	if _, ok := b.Offsets().Query("cqg", "Cq", 0); ok {
		t.Fatal("deleteSubGroup -r kept the offsets")
	}

	check := func(expr string) *protocol.Command {
		body, _ := protocol.EncodeJSON(protocol.CheckClientRequestBody{ClientID: "c", Group: "g",
			SubscriptionData: &protocol.SubscriptionData{Topic: "Cq", SubString: "a > 1", ExpressionType: expr}})
		return javaInvoke(t, b.Addr(), protocol.CheckClientConfig, nil, body)
	}
	if resp := check("TAG"); resp.Code != protocol.Success {
		t.Fatalf("TAG check: %d", resp.Code)
	}
	if resp := check("SQL92"); resp.Code != protocol.SystemError {
		t.Fatalf("SQL92 check: %d", resp.Code)
	}
}

// When no consumer of the group is online mqadmin resetOffsetByTime falls
// back to its old way: the group's consume stats (208), an offset search
// by time per queue (29) and a commit per queue (15, with RocketMQ 4.9.8's
// bname field), all answered as a 4.9 broker answers them.
func TestBrokerMQAdminResetOffsetFallback(t *testing.T) {
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Now = clk.now })
	c := newTestClient(t, b.Addr())
	var times []int64
	for i := 0; i < 3; i++ {
		times = append(times, clk.now().UnixMilli())
		c.mustSend("Fallback", 0, "m"+itoa(i), "")
		clk.advance(time.Second)
	}
	waitDispatched(t, b, "Fallback", 0, 3)
	commitOffset(t, c, "fbg", "Fallback", 0, 3)
	ts := strconv.FormatInt(times[1], 10)
	if resp := javaInvoke(t, b.Addr(), protocol.InvokeBrokerToResetOffset, map[string]string{
		"topic": "Fallback", "group": "fbg", "timestamp": ts, "isForce": "true"}, nil); resp.Code != protocol.ConsumerNotOnline {
		t.Fatalf("reset with nobody online: %d %s", resp.Code, resp.Remark)
	}
	cs := decodeBody[protocol.ConsumeStats](t, javaInvoke(t, b.Addr(), protocol.GetConsumeStats, map[string]string{"consumerGroup": "fbg"}, nil))
	for _, e := range cs.OffsetTable {
		if e.Queue.Topic != "Fallback" {
			continue
		}
		resp := javaInvoke(t, b.Addr(), protocol.SearchOffsetByTimestamp, map[string]string{
			"topic": "Fallback", "queueId": itoa(int(e.Queue.QueueID)), "timestamp": ts, "bname": "broker-t"}, nil)
		var oh protocol.OffsetResponseHeader
		if resp.Code != protocol.Success || resp.DecodeHeader(&oh) != nil {
			t.Fatalf("search offset: %d %s", resp.Code, resp.Remark)
		}
		if e.Queue.QueueID == 0 && oh.Offset != 1 {
			t.Fatalf("offset at %s: %d", ts, oh.Offset)
		}
		if resp := javaInvoke(t, b.Addr(), protocol.UpdateConsumerOffset, map[string]string{"consumerGroup": "fbg", "topic": "Fallback",
			"queueId": itoa(int(e.Queue.QueueID)), "commitOffset": strconv.FormatInt(oh.Offset, 10), "bname": "broker-t"}, nil); resp.Code != protocol.Success {
			t.Fatalf("commit: %d %s", resp.Code, resp.Remark)
		}
	}
	if off, _ := b.Offsets().Query("fbg", "Fallback", 0); off != 1 {
		t.Fatalf("offset after the fallback reset: %d", off)
	}
}
