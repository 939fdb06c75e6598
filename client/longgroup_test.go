package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// keptLongGroupCluster starts brokers masters (broker-a, broker-b, ...),
// the first of which has a subscriptionGroup.json holding group (longer
// than MaxGroupLength), as an older SmartGo or RocketMQ broker left it.
func keptLongGroupCluster(t *testing.T, group string, brokers int) *cluster.Cluster {
	t.Helper()
	dir := t.TempDir()
	w := protocol.SubscriptionGroupWrapper{SubscriptionGroupTable: map[string]*protocol.SubscriptionGroupConfig{group: {
		GroupName: group, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true,
	}}}
	raw, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "broker-0", "config")
	if err := os.MkdirAll(config, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "subscriptionGroup.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: dir, Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A consumer group of 121-127 characters that the broker already keeps
// (taken before the 120-character limit) works with the SDK: the push
// consumer starts, receives, and consumes a failed message again itself
// (the group has no retry topic to send it back to). A new group that
// long is refused by the broker, and Start returns that refusal instead
// of leaving a consumer that never receives. The SDK refused both
// ("want 1 to 120 characters").
func TestPushConsumerKeptLongGroup(t *testing.T) {
	kept := "kept" + strings.Repeat("g", 121)   // 125 characters
	fresh := "fresh" + strings.Repeat("g", 120) // 125 characters
	c := keptLongGroupCluster(t, kept, 1)
	createTopic(t, c, 1, "LongGroupT", 2)
	p := newTestProducer(t, c, nil)
	sendN(t, p, "LongGroupT", "m", 4)

	col := newCollector()
	failed := make(chan struct{}, 1)
	newTestPush(t, c, kept, "LongGroupT", "*", func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			if string(m.Body) == "m-1" {
				select {
				case failed <- struct{}{}: // the first time only
					return ConsumeRetryLater
				default:
				}
			}
		}
		return col.handler(ctx, msgs)
	}, func(o *ConsumerOptions) { o.ConsumeBatchSize = 1 })
	testutil.WaitFor(t, 60*time.Second, "every message, m-1 after its failure", func() bool {
		return col.count("m-0") == 1 && col.count("m-1") == 1 && col.count("m-2") == 1 && col.count("m-3") == 1
	})

	pc, err := NewPushConsumer(ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: fresh,
		OffsetDir: t.TempDir()}, col.handler)
	if err != nil {
		t.Fatalf("new consumer of a new long group: %v (the broker decides)", err)
	}
	defer pc.Close()
	if err := pc.Subscribe("LongGroupT", "*"); err != nil {
		t.Fatal(err)
	}
	err = pc.Start(testCtx(t, 30*time.Second))
	if err == nil || !strings.Contains(err.Error(), "at most 120") {
		t.Fatalf("start of a new 125-character group: %v; want the broker's refusal", err)
	}
	if err := ValidateGroup(strings.Repeat("g", 128)); err == nil {
		t.Fatal("a 128-character group passed ValidateGroup")
	}
}

// A kept long group on one master of two: the consumer starts and
// consumes what that master holds, with a WARN naming the master that
// refuses the group (whose queues it cannot consume). Start used to fail
// because one broker refused, though another serves the group.
func TestPushConsumerKeptLongGroupOnOneBrokerOfTwo(t *testing.T) {
	kept := "kept" + strings.Repeat("g", 121) // 125 characters
	c := keptLongGroupCluster(t, kept, 2)
	createTopic(t, c, 2, "LongGroup2T", 1)
	p := newTestProducer(t, c, nil)
	var onA []string
	for i, r := range sendN(t, p, "LongGroup2T", "m", 8) {
		if r.Queue.BrokerName == "broker-a" {
			onA = append(onA, fmt.Sprintf("m-%d", i))
		}
	}
	if len(onA) == 0 {
		t.Fatal("no message went to broker-a")
	}
	col := newCollector()
	newTestPush(t, c, kept, "LongGroup2T", "*", col.handler, nil)
	testutil.WaitFor(t, 60*time.Second, "every message broker-a holds", func() bool {
		for _, b := range onA {
			if col.count(b) == 0 {
				return false
			}
		}
		return true
	})
}
