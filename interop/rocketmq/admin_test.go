package rocketmq

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// rocketmq-client-go's admin API (what it has of mqadmin: updateTopic,
// topicList, topicRoute, getConsumerConfig, deleteTopic) against
// `smartgo standalone`.
func TestInteropGoAdminAPI(t *testing.T) {
	s := startStandalone(t)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{s.registry})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const name = "InteropAdminTopic"
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(name), admin.WithBrokerAddrCreate(s.broker),
		admin.WithReadQueueNums(3), admin.WithWriteQueueNums(3)); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	testutil.WaitFor(t, 30*time.Second, "the new topic's route", func() bool {
		mqs, err := adm.FetchPublishMessageQueues(ctx, name)
		return err == nil && len(mqs) == 3
	})
	list, err := adm.FetchAllTopicList(ctx)
	if err != nil || !contains(list.TopicList, name) {
		t.Fatalf("FetchAllTopicList: %+v %v", list, err)
	}

	// A consumer group appears in the broker's subscription groups.
	newPushConsumer(t, s, "interop-admin-cg", "cons-admin", name, consumer.Clustering, func(*primitive.MessageExt) consumer.ConsumeResult {
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 30*time.Second, "the consumer's group", func() bool {
		w, err := adm.GetAllSubscriptionGroup(ctx, s.broker, 3*time.Second)
		if err != nil {
			return false
		}
		g, ok := w.SubscriptionGroupTable["interop-admin-cg"]
		return ok && g.ConsumeEnable && g.RetryMaxTimes == 16
	})

	if err := adm.DeleteTopic(ctx, admin.WithTopicDelete(name), admin.WithBrokerAddrDelete(s.broker),
		admin.WithNameSrvAddr([]string{s.registry})); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	// (The Go admin caches routes: ask the registry itself.)
	resp := testnet.JavaInvoke(t, s.registry, protocol.GetRouteInfoByTopic, map[string]string{"topic": name}, nil)
	if resp.Code != protocol.TopicNotExist {
		t.Fatalf("route after DeleteTopic: %d %s", resp.Code, resp.Body)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// deliveries counts deliveries per body.
type deliveries struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *deliveries) add(body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[body]++
}

func (d *deliveries) count(body string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[body]
}

// The mqadmin requests that reach a consumer through the broker, sent as
// mqadmin 4.9.8 sends them, with a live rocketmq-client-go push consumer:
// queryMsgById's QUERY_TOPIC_CONSUME_BY_WHO, consumerStatus's
// GET_CONSUMER_RUNNING_INFO, getConsumerStatus, queryMsgById -g -d's
// CONSUME_MESSAGE_DIRECTLY, and resetOffsetByTime, after which the
// consumer receives again what was stored after the reset time.
func TestInteropMQAdminWithGoConsumer(t *testing.T) {
	s := startStandalone(t)
	const topicName, group = "InteropMQAdmin", "interop-mqadmin-cg"
	createTopic(t, s.broker, topicName, 2)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-mqadmin")
	send := func(body string) *primitive.SendResult {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topicName, []byte(body)))
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		return res
	}
	first := send("before-0")
	send("before-1")
	cut := time.Now().UnixMilli() + 1
	testutil.WaitFor(t, 5*time.Second, "the clock to pass the cut", func() bool { return time.Now().UnixMilli() > cut })
	send("after-0")
	send("after-1")

	var got deliveries
	newPushConsumer(t, s, group, "cons-mqadmin", topicName, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(string(m.Body))
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "the four messages", func() bool {
		return got.count("before-0") > 0 && got.count("before-1") > 0 && got.count("after-0") > 0 && got.count("after-1") > 0
	})
	java := func(code int32, fields map[string]string) *protocol.Command {
		return testnet.JavaInvoke(t, s.broker, code, fields, nil)
	}

	// The consumer's client id, as consumerConnection learns it.
	var conn protocol.ConsumerConnection
	resp := java(protocol.GetConsumerConnectionList, map[string]string{"consumerGroup": group})
	if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &conn) != nil || len(conn.ConnectionSet) != 1 {
		t.Fatalf("consumer connection: %d %s %s", resp.Code, resp.Remark, resp.Body)
	}
	clientID := conn.ConnectionSet[0].ClientID

	var groups protocol.GroupList
	resp = java(protocol.QueryTopicConsumeByWho, map[string]string{"topic": topicName})
	if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &groups) != nil || !contains(groups.GroupList, group) {
		t.Fatalf("consume by who: %d %s", resp.Code, resp.Body)
	}

	resp = java(protocol.GetConsumerRunningInfo, map[string]string{"consumerGroup": group, "clientId": clientID, "jstackEnable": "false"})
	if resp.Code != protocol.Success || !bytes.Contains(resp.Body, []byte(`"subscriptionSet"`)) || !bytes.Contains(resp.Body, []byte(topicName)) {
		t.Fatalf("running info: %d %s %s", resp.Code, resp.Remark, resp.Body)
	}

	testutil.WaitFor(t, 30*time.Second, "the consumer's offsets in its status", func() bool {
		var st protocol.GetConsumerStatusBody
		resp := java(protocol.InvokeBrokerToGetConsumerStatus, map[string]string{"topic": topicName, "group": group})
		if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &st) != nil {
			return false
		}
		var sum int64
		for _, e := range st.ConsumerTable[clientID] {
			sum += e.Value
		}
		return sum == 4
	})

	resp = java(protocol.ConsumeMessageDirectly, map[string]string{"consumerGroup": group, "clientId": clientID, "msgId": first.OffsetMsgID})
	if resp.Code != protocol.Success || !bytes.Contains(resp.Body, []byte("consumeResult")) {
		t.Fatalf("consume directly: %d %s %s", resp.Code, resp.Remark, resp.Body)
	}
	testutil.WaitFor(t, 10*time.Second, "the direct delivery", func() bool { return got.count("before-0") >= 2 })

	if resp := java(protocol.InvokeBrokerToResetOffset, map[string]string{"topic": topicName, "group": "never-online",
		"timestamp": strconv.FormatInt(cut, 10), "isForce": "true"}); resp.Code != protocol.ConsumerNotOnline {
		t.Fatalf("reset of an offline group: %d %s", resp.Code, resp.Remark)
	}
	resp = java(protocol.InvokeBrokerToResetOffset, map[string]string{"topic": topicName, "group": group,
		"timestamp": strconv.FormatInt(cut, 10), "isForce": "true"})
	var table protocol.ResetOffsetBody
	if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &table) != nil || len(table.OffsetTable) != 2 {
		t.Fatalf("reset: %d %s %s", resp.Code, resp.Remark, resp.Body)
	}
	// The Go client pauses 10 s before it applies a reset.
	testutil.WaitFor(t, 60*time.Second, "the messages after the reset time again", func() bool {
		return got.count("after-0") >= 2 && got.count("after-1") >= 2
	})
	if n := got.count("before-1"); n != 1 {
		t.Errorf("before-1 delivered %d times; the reset went too far back", n)
	}
	t.Logf("deliveries: %s", fmt.Sprint(got.n))
}

// `smartgo admin offset reset` while a rocketmq-client-go push consumer of
// the group runs: the consumer receives again what was stored after the
// reset time, and the committed offsets stay reset (the consumer does not
// commit its old positions over them). The CLI used to write the offsets
// itself, which the running consumer overwrote.
func TestInteropAdminOffsetResetWithGoConsumer(t *testing.T) {
	s := startStandalone(t)
	const topicName, group = "InteropCLIReset", "interop-cli-reset"
	createTopic(t, s.broker, topicName, 2)
	p := newProducer(t, s, "prod-cli-reset")
	send := func(body string) {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topicName, []byte(body))); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	send("before-0")
	send("before-1")
	cut := time.Now().UnixMilli() + 1
	testutil.WaitFor(t, 5*time.Second, "the clock to pass the cut", func() bool { return time.Now().UnixMilli() > cut })
	for i := range 4 {
		send(fmt.Sprint("after-", i))
	}
	var got deliveries
	newPushConsumer(t, s, group, "cons-cli-reset", topicName, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(string(m.Body))
		return consumer.ConsumeSuccess
	})
	all := func(n int) bool {
		for i := range 4 {
			if got.count(fmt.Sprint("after-", i)) < n {
				return false
			}
		}
		return true
	}
	testutil.WaitFor(t, 60*time.Second, "the six messages", func() bool { return all(1) && got.count("before-1") == 1 })
	// The consumer commits what it consumed (every 5 s in the Go client).
	progress := func() string {
		out, err := exec.Command(smartgoBinary(t), "admin", "group", "progress", "-g", group, "-t", topicName, "-o", "json", "-registry", s.registry).CombinedOutput()
		if err != nil {
			t.Fatalf("group progress: %v %s", err, out)
		}
		return string(out)
	}
	testutil.WaitFor(t, 30*time.Second, "the consumer's commit", func() bool { return strings.Contains(progress(), `"totalLag": 0`) })

	out, err := exec.Command(smartgoBinary(t), "admin", "offset", "reset", "-g", group, "-t", topicName,
		"-ts", strconv.FormatInt(cut, 10), "-registry", s.registry).CombinedOutput()
	if err != nil {
		t.Fatalf("offset reset: %v %s", err, out)
	}
	// The Go client pauses 10 s before it applies a reset.
	testutil.WaitFor(t, 60*time.Second, "the messages after the reset time again", func() bool { return all(2) })
	if n := got.count("before-1"); n != 1 {
		t.Errorf("before-1 delivered %d times; the reset went too far back", n)
	}
}

// mqadmin updateBrokerConfig -k autoCreateTopicEnable at run time, seen by
// rocketmq-client-go producers: off, the registry stops routing TBW102 and
// a send to a new topic fails; on again, a new topic is created by its
// first send.
func TestInteropAutoCreateTopicSwitch(t *testing.T) {
	s := startStandalone(t)
	set := func(v string) {
		t.Helper()
		resp := testnet.JavaInvoke(t, s.broker, protocol.UpdateBrokerConfig, nil,
			protocol.EncodeProperties(map[string]string{"autoCreateTopicEnable": v}))
		if resp.Code != protocol.Success {
			t.Fatalf("autoCreateTopicEnable=%s: %d %s", v, resp.Code, resp.Remark)
		}
	}
	routed := func() bool {
		return testnet.JavaInvoke(t, s.registry, protocol.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil).Code == protocol.Success
	}
	set("false")
	testutil.WaitFor(t, 30*time.Second, "the registry to drop TBW102", func() bool { return !routed() })
	p := newProducer(t, s, "prod-autocreate-off")
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("InteropNotCreated", []byte("x"))); err == nil {
		t.Fatal("a send to a new topic succeeded with auto-creation off")
	}
	if resp := testnet.JavaInvoke(t, s.registry, protocol.GetRouteInfoByTopic, map[string]string{"topic": "InteropNotCreated"}, nil); resp.Code != protocol.TopicNotExist {
		t.Fatalf("route of the refused topic: %d %s", resp.Code, resp.Body)
	}
	set("true")
	testutil.WaitFor(t, 30*time.Second, "the registry to route TBW102 again", routed)
	p2 := newProducer(t, s, "prod-autocreate-on")
	if res, err := p2.SendSync(context.Background(), primitive.NewMessage("InteropCreatedLater", []byte("x"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send to a new topic with auto-creation on again: %v %v", res, err)
	}
}
