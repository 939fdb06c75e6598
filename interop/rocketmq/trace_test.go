package rocketmq

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// traceRan is set once TestInteropMessageTrace ran in this process.
var traceRan atomic.Bool

// rocketmq-client-go with message tracing on: its trace dispatcher sends
// only to a trace topic the registry already routes (it has no TBW102
// fallback), so the broker must have RMQ_SYS_TRACE_TOPIC from the start.
// The producer's Pub and the consumer's SubBefore/SubAfter records are
// then found by message id, as mqadmin queryMsgTraceById looks for them.
func TestInteropMessageTrace(t *testing.T) {
	if traceRan.Swap(true) {
		// The client keeps its trace client (ip@INNER_TRACE_CLIENT_DEFAULT)
		// for the life of the process, bound to the first registry it was
		// given, and a producer with tracing on panics on any other.
		t.Skip("rocketmq-client-go allows one trace registry per process; this test ran already (-count > 1)")
	}
	s := startStandalone(t)
	const topic, group = "InteropTraced", "interop-trace-cg"
	createTopic(t, s.broker, topic, 2)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	resolver := primitive.NewPassthroughResolver([]string{s.registry})
	trace := &primitive.TraceConfig{Access: primitive.Local, Resolver: resolver}
	p, err := rocketmq.NewProducer(producer.WithNsResolver(resolver), producer.WithGroupName("interop-trace-pg"), producer.WithTrace(trace))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("traced")).WithKeys([]string{"trace-key"}))
	if err != nil {
		t.Fatal(err)
	}
	var got received
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithTrace(trace))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(m)
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	testutil.WaitFor(t, 60*time.Second, "the traced message", func() bool { return got.distinct() == 1 })

	var body []byte
	testutil.WaitFor(t, 60*time.Second, "the Pub and SubAfter trace records of "+res.MsgID, func() bool {
		resp := testnet.JavaInvoke(t, s.broker, protocol.QueryMessage, map[string]string{"topic": "RMQ_SYS_TRACE_TOPIC",
			"key": res.MsgID, "maxNum": "32", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, nil)
		body = resp.Body
		return resp.Code == protocol.Success && bytes.Contains(body, []byte("Pub\x01")) && bytes.Contains(body, []byte("SubAfter\x01"))
	})
	for _, want := range []string{topic, "interop-trace-pg", group, res.MsgID, res.OffsetMsgID, "trace-key"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("trace records lack %q: %q", want, body)
		}
	}
}
