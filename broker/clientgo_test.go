package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// clientGoVector reads a body captured from rocketmq-client-go v2.1.2
// (remoting/protocol/testdata/clientgo).
func clientGoVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "remoting", "protocol", "testdata", "clientgo", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The heartbeat bytes of a rocketmq-client-go push consumer subscribed to
// CapTopic with "TagA || TagB" (codeSet as JSON strings) register it, and
// its pulls get exactly the messages of those tags.
func TestBrokerClientGoTagHeartbeat(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 6; i++ {
		tag := []string{"TagA", "TagB", "TagC"}[i%3]
		c.mustSend("CapTopic", 0, tag+"-"+itoa(i), props(record.PropertyTags, tag))
	}
	waitDispatched(t, b, "CapTopic", 0, 6)
	if resp := c.invoke(protocol.HeartBeat, nil, clientGoVector(t, "heartbeat_consumer_tags.json")); resp.Code != protocol.Success {
		t.Fatalf("client-go heartbeat refused: %d %s", resp.Code, resp.Remark)
	}
	resp := c.invoke(protocol.GetConsumerListByGroup, &protocol.ConsumerGroupHeader{ConsumerGroup: "cap-cg"}, nil)
	var list protocol.ConsumerIDList
	if err := protocol.DecodeJSON(resp.Body, &list); err != nil || len(list.ConsumerIDList) != 1 || list.ConsumerIDList[0] != "192.0.2.2@cap-cons" {
		t.Fatalf("consumer list %d %s %v", resp.Code, resp.Remark, list)
	}
	r := c.pull("cap-cg", "CapTopic", 0, 0, 0, 0, "")
	if r.code != protocol.Success || len(r.msgs) != 4 {
		t.Fatalf("pull with the heartbeat's subscription: code %d, %d msgs", r.code, len(r.msgs))
	}
	for _, m := range r.msgs {
		if tag := propOf(m, record.PropertyTags); tag != "TagA" && tag != "TagB" {
			t.Fatalf("pulled tag %s", tag)
		}
	}
	// The orderly consumer's heartbeat and LOCK_BATCH_MQ body decode too.
	if resp := c.invoke(protocol.HeartBeat, nil, clientGoVector(t, "heartbeat_consumer_single_tag.json")); resp.Code != protocol.Success {
		t.Fatalf("single-tag heartbeat refused: %d %s", resp.Code, resp.Remark)
	}
	resp = c.invoke(protocol.LockBatchMQ, nil, clientGoVector(t, "lock_batch.json"))
	var locked protocol.LockBatchResponseBody
	if err := protocol.DecodeJSON(resp.Body, &locked); err != nil || len(locked.LockOKMQSet) != 1 || locked.LockOKMQSet[0].QueueID != 7 {
		t.Fatalf("lock: %d %s %+v %v", resp.Code, resp.Remark, locked, err)
	}
}
