package broker

import (
	"context"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A consumer that commits an offset one way and then asks for it on the
// same connection reads what it committed. rocketmq-client-go does exactly
// this when it applies an offset reset (RESET_CONSUMER_CLIENT_OFFSET): it
// persists the new offsets with one-way UPDATE_CONSUMER_OFFSET requests,
// resumes, and its rebalance reads them back with QUERY_CONSUMER_OFFSET.
// A query answered before the commit it follows gives the client the old
// offset, and the reset is lost for good (the client then commits the old
// offset again).
func TestBrokerOnewayCommitThenQueryInOrder(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	const group, topic = "og-order", "OffOrder"
	const rounds = 2000
	stale := 0
	for i := range rounds {
		want := int64(i%2*1000 + i) // alternates far back and far ahead
		req := protocol.NewRequest(protocol.UpdateConsumerOffset,
			&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: 0, CommitOffset: want}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.c.InvokeOneway(ctx, c.addr, req); err != nil {
			cancel()
			t.Fatalf("oneway commit %d: %v", i, err)
		}
		cancel()
		resp := c.invoke(protocol.QueryConsumerOffset, &protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: 0}, nil)
		var oh protocol.OffsetResponseHeader
		if resp.Code != protocol.Success || resp.DecodeHeader(&oh) != nil {
			t.Fatalf("query %d: %d %s", i, resp.Code, resp.Remark)
		}
		if oh.Offset != want {
			stale++
		}
	}
	if stale > 0 {
		t.Fatalf("%d of %d queries right after a one-way commit on the same connection read an older offset", stale, rounds)
	}
}
