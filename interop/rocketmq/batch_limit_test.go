package rocketmq

import (
	"bytes"
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropBatchOverMaxMessageSize: rocketmq-client-go does not bound
// a batch's size itself; a batch of five 1 MiB messages (each within the
// 4 MiB maxMessageSize, together over it) is refused by the broker with
// MESSAGE_ILLEGAL (13) and RocketMQ's remark, as RocketMQ's store bounds
// the whole encoded batch body; a batch of three is stored and delivered.
func TestInteropBatchOverMaxMessageSize(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropBatchLimit"
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		producer.WithGroupName("interop-pg-batchlimit"), producer.WithRetry(0), producer.WithSendMsgTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	batch := func(prefix string, n int) []*primitive.Message {
		msgs := make([]*primitive.Message, n)
		for i := range msgs {
			body := bytes.Repeat([]byte{'.'}, 1<<20)
			copy(body, prefix+strconv.Itoa(i)+"|")
			msgs[i] = primitive.NewMessage(topic, body)
		}
		return msgs
	}
	ctx := context.Background()
	res, err := p.SendSync(ctx, batch("big-", 5)...)
	if err == nil {
		t.Fatalf("a 5 MiB batch was accepted: %+v", res)
	}
	if !strings.Contains(err.Error(), "CODE: 13") || !strings.Contains(err.Error(), "msg body length limit 4194304B") {
		t.Fatalf("a 5 MiB batch: %v, want CODE: 13 with the body length limit", err)
	}
	res, err = p.SendSync(ctx, batch("ok-", 3)...)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("a 3 MiB batch: %v %v", res, err)
	}
	var mu sync.Mutex
	got := map[string]int{} // body prefix -> deliveries; protected by mu
	newPushConsumer(t, s, "interop-batchlimit", "cons-batchlimit", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		prefix, _, _ := bytes.Cut(m.Body, []byte("|"))
		mu.Lock()
		got[string(prefix)]++
		mu.Unlock()
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "the 3 messages of the stored batch", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["ok-0"] > 0 && got["ok-1"] > 0 && got["ok-2"] > 0
	})
	mu.Lock()
	defer mu.Unlock()
	for k := range got {
		if strings.HasPrefix(k, "big-") {
			t.Fatalf("a message of the refused batch was delivered: %q (all: %v)", k, got)
		}
	}
}

// TestInteropMessageOverMaxMessageSize: a single message whose body is
// one byte over the 4 MiB maxMessageSize (random, so that the client's
// compression does not shrink it) is refused with RocketMQ's answer:
// MESSAGE_ILLEGAL (13) and its remark naming the body length limit, not
// the store's own error text; one of 4 MiB less 64 KiB (room for the compression's overhead) is
// stored.
func TestInteropMessageOverMaxMessageSize(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropMessageLimit"
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		producer.WithGroupName("interop-pg-msglimit"), producer.WithRetry(0), producer.WithSendMsgTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	body := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	ctx := context.Background()
	res, err := p.SendSync(ctx, primitive.NewMessage(topic, body(4<<20+1)))
	if err == nil {
		t.Fatalf("a message over 4 MiB was accepted: %+v", res)
	}
	const remark = "the message is illegal, maybe msg body or properties length not matched. msg body length limit 4194304B, msg properties length limit 32KB."
	if !strings.Contains(err.Error(), "CODE: 13") || !strings.Contains(err.Error(), remark) {
		t.Fatalf("a message over 4 MiB: %v, want CODE: 13 and %q", err, remark)
	}
	if strings.Contains(err.Error(), "store:") {
		t.Fatalf("a message over 4 MiB: %v: the store's error text reached the client", err)
	}
	res, err = p.SendSync(ctx, primitive.NewMessage(topic, body(4<<20-64<<10)))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("a message of 4 MiB less 64 KiB: %v %v", res, err)
	}
}
