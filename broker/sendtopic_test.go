package broker

import (
	"strings"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A send to the topic the last send found skips the name checks and the
// lookup (TopicManager.sendable); every change of the topic table is seen
// by the next send: a permission taken away, fewer queues, the topic
// deleted. Sends to other topics in between, reserved and badly named
// ones among them, are checked in full.
func TestBrokerSendSeesTopicChangesAtOnce(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.AutoCreateTopic = false })
	c := newTestClient(t, b.Addr())
	update := func(topic string, perm, queues int32) {
		t.Helper()
		resp := c.invoke(protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{Topic: topic, DefaultTopic: AutoCreateTopicKey,
			ReadQueueNums: queues, WriteQueueNums: queues, Perm: perm, TopicFilterType: protocol.TopicFilterSingleTag}, nil)
		if resp.Code != protocol.Success {
			t.Fatalf("update %s: %d %s", topic, resp.Code, resp.Remark)
		}
	}
	expect := func(topic string, queue int32, code int32, text string) {
		t.Helper()
		resp := c.send(topic, queue, "x", "")
		if resp.Code != code || !strings.Contains(resp.Remark, text) {
			t.Fatalf("send to %s queue %d: %d %q; want %d mentioning %q", topic, queue, resp.Code, resp.Remark, code, text)
		}
	}
	update("Hot", PermRW, 2)
	update("Other", PermRW, 1)
	for range 3 {
		expect("Hot", 1, protocol.Success, "")
	}
	update("Hot", PermRead, 2)
	expect("Hot", 1, protocol.NoPermission, "Hot")
	update("Hot", PermRW, 1)
	expect("Hot", 1, protocol.SystemError, "queueId[1]")
	expect("Hot", 0, protocol.Success, "")
	expect("Hot", 0, protocol.Success, "")
	expect(ScheduleTopic, 0, protocol.NoPermission, ScheduleTopic)
	expect("Hot", 0, protocol.Success, "")
	expect("Hot!", 0, protocol.SystemError, "Hot!")
	expect("Ho", 0, protocol.TopicNotExist, "Ho")
	expect("Other", 0, protocol.Success, "")
	expect("Hot", 0, protocol.Success, "")
	if resp := c.invoke(protocol.DeleteTopicInBroker, &protocol.DeleteTopicRequestHeader{Topic: "Hot"}, nil); resp.Code != protocol.Success {
		t.Fatalf("delete: %d %s", resp.Code, resp.Remark)
	}
	expect("Hot", 0, protocol.TopicNotExist, "Hot")
	update("Hot", PermRW, 1)
	expect("Hot", 0, protocol.Success, "")
	expect("Hot", 0, protocol.Success, "")
	// The broker's own write permission is checked on every send too.
	b.perm.Store(PermRead)
	expect("Hot", 0, protocol.NoPermission, "forbidden")
	b.perm.Store(PermRW)
	expect("Hot", 0, protocol.Success, "")
}
