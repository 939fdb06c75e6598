package rocketmq

import (
	"context"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/smartgo/smartgo/client/admin"
)

// TestInteropBatchWithOneBadMessage: rocketmq-client-go batches in which
// one message cannot be stored (its properties over RocketMQ's 32 KiB
// limit, which the client encodes as a length that does not fit its 16
// bits; a delay level, which a batch cannot have) are refused whole,
// with MESSAGE_ILLEGAL (13) and a reason: no message of them is stored,
// not even those before the bad one. A good batch sent after them is
// stored from the queue's first offset.
func TestInteropBatchWithOneBadMessage(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropBatchBad"
	createTopic(t, s.broker, topic, 1)
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		producer.WithGroupName("interop-pg-batchbad"), producer.WithRetry(0), producer.WithSendMsgTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	batch := func(prefix string, bad func(*primitive.Message)) []*primitive.Message {
		msgs := []*primitive.Message{primitive.NewMessage(topic, []byte(prefix+"-0")), primitive.NewMessage(topic, []byte(prefix+"-1")),
			primitive.NewMessage(topic, []byte(prefix+"-2"))}
		if bad != nil {
			bad(msgs[1])
		}
		return msgs
	}
	ctx := context.Background()
	for _, c := range []struct {
		name, reason string
		bad          func(*primitive.Message)
	}{
		// The client writes the item's PROPERTIESLEN as a 16-bit value:
		// over 32767 it is negative, over 65535 it wraps to a small one.
		{"props", "bad batch body", func(m *primitive.Message) { m.WithProperty("big", strings.Repeat("x", 33<<10)) }},
		{"wrapped", "bad batch body", func(m *primitive.Message) { m.WithProperty("big", strings.Repeat("x", 64<<10)) }},
		{"delay", "delay level", func(m *primitive.Message) { m.WithDelayTimeLevel(2) }},
	} {
		res, err := p.SendSync(ctx, batch(c.name, c.bad)...)
		if err == nil {
			t.Fatalf("a batch with a bad message (%s) was accepted: %+v", c.name, res)
		}
		if !strings.Contains(err.Error(), "CODE: 13") || !strings.Contains(err.Error(), c.reason) {
			t.Fatalf("a batch with a bad message (%s): %v, want CODE: 13 naming %q", c.name, err, c.reason)
		}
	}
	res, err := p.SendSync(ctx, batch("good", nil)...)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("a good batch: %v %v", res, err)
	}
	if res.QueueOffset != 0 {
		t.Errorf("the good batch was stored from queue offset %d, want 0 (nothing of the refused ones stored)", res.QueueOffset)
	}
	adm, err := admin.New(admin.Options{Registries: []string{s.registry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	msgs, _, _, maxOff, err := adm.BrowseMessages(ctx, topic, "broker-a", 0, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, string(m.Body))
	}
	if maxOff != 3 || strings.Join(bodies, ",") != "good-0,good-1,good-2" {
		t.Fatalf("the queue holds %v (max offset %d), want the good batch only", bodies, maxOff)
	}
}
