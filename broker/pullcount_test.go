package broker

import (
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A pull whose maxMsgNums is 0 or negative is served one message, as
// RocketMQ serves it. rocketmq-client-go v2.1.2's pull consumer sends 0
// from its background pulls (Poll) unless the application set a batch
// size; refusing it left Poll with nothing, ever.
func TestBrokerPullNonPositiveCountServesOne(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 3; i++ {
		c.mustSend("PullCount", 0, "m-"+itoa(i), "")
	}
	waitDispatched(t, b, "PullCount", 0, 3)
	for _, n := range []string{"0", "-1"} {
		// The fields as rocketmq-client-go writes them (long names, all
		// strings, the subscription flag set).
		resp := javaInvoke(t, b.Addr(), protocol.PullMessage, map[string]string{
			"consumerGroup": "pull-count", "topic": "PullCount", "queueId": "0", "queueOffset": "1", "maxMsgNums": n,
			"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG",
		}, nil)
		if resp.Code != protocol.Success {
			t.Fatalf("maxMsgNums %s: code %d %q", n, resp.Code, resp.Remark)
		}
		var h protocol.PullMessageResponseHeader
		if err := resp.DecodeHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.NextBeginOffset != 2 || h.MaxOffset != 3 {
			t.Fatalf("maxMsgNums %s: header %+v, want one message (next 2 of 3)", n, h)
		}
	}
}
