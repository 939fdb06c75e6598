package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A topic.json may hold a topic with no write queue (writeQueueNums 0:
// RocketMQ's way to stop producing to a topic while it is consumed). A
// send or a reply that leaves the queue to the broker (queueId -1) gets
// SYSTEM_ERROR naming the topic and its zero write queues, as RocketMQ
// answers it, not a recovered panic; a send naming a queue below the read
// queues is still taken (RocketMQ checks against max(read, write)), and
// the broker serves on.
func TestBrokerSendToTopicWithNoWriteQueue(t *testing.T) {
	dir := t.TempDir()
	w := protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]*protocol.TopicConfig{
		"Stopped": {TopicName: "Stopped", ReadQueueNums: 2, WriteQueueNums: 0, Perm: PermRW, TopicFilterType: protocol.TopicFilterSingleTag},
		"Open":    {TopicName: "Open", ReadQueueNums: 2, WriteQueueNums: 2, Perm: PermRW, TopicFilterType: protocol.TopicFilterSingleTag},
	}}
	raw, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", TopicConfigFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b := testBroker(t, dir, func(o *Options) { o.AutoCreateTopic = false })
	c := newTestClient(t, b.Addr())
	want := func(what string, resp *protocol.Command) {
		t.Helper()
		if resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "topic[Stopped] has no writable queue (writeQueueNums 0") {
			t.Fatalf("%s: %d %q; want SYSTEM_ERROR naming the topic's zero write queues", what, resp.Code, resp.Remark)
		}
	}
	for range 2 { // the second send goes the last-send shortcut
		want("send", c.send("Stopped", -1, "x", ""))
	}
	reply := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "Stopped", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: -1, BornTimestamp: time.Now().UnixMilli(), Properties: props("REPLY_TO_CLIENT", "nobody")}
	want("reply", c.invoke(protocol.SendReplyMessage, reply, []byte("r")))
	want("reply v2", c.invoke(protocol.SendReplyMessageV2, reply.V2(), []byte("r")))
	c.mustSend("Stopped", 1, "named queue", "")
	c.mustSend("Open", -1, "another topic", "")
}
