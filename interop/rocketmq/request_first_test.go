package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// A fresh rocketmq-client-go v2.1.2 requester gets the replies to its
// very first requests. That client sends its heartbeat to the brokers it
// knows a second after it starts and then every 30 s, and not to a broker
// whose route it learns on its first request: the broker learns the
// requester's connection from the request itself (REPLY_TO_CLIENT), so the
// reply is pushed at once instead of failing with "not connected" until
// the next heartbeat (before the broker did so, the first request of a
// fresh requester timed out). Each requester here is new and asks at once.
func TestInteropRequestFirstReplies(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropRpcFirst"
	createTopic(t, s.broker, topic, 2)
	ctx := context.Background()

	startResponder(t, s, "rpc-first", topic, func(replier rocketmq.Producer, _ *primitive.MessageExt, reply *primitive.Message) {
		_, _ = replier.SendSync(context.Background(), reply)
	})
	// The responder is ready once a warm requester (retrying) is answered.
	warm := newProducer(t, s, "rpc-first-warm")
	testutil.WaitFor(t, 60*time.Second, "the responder", func() bool {
		_, err := warm.Request(ctx, 5*time.Second, primitive.NewMessage(topic, []byte("warm")))
		return err == nil
	})

	for i := range 3 {
		p := newProducer(t, s, fmt.Sprintf("rpc-first-%d", i))
		for j := range 4 {
			body := fmt.Sprintf("first-%d-%d", i, j)
			start := time.Now()
			reply, err := p.Request(ctx, 10*time.Second, primitive.NewMessage(topic, []byte(body)))
			if err != nil {
				t.Fatalf("fresh requester %d, request %d, after %v: %v", i, j, time.Since(start), err)
			}
			if string(reply.Body) != "re:"+body {
				t.Fatalf("request %s: reply %q", body, reply.Body)
			}
		}
	}
}
