package rocketmq

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestInteropLongGroupKeptAfterUpgrade: a consumer group of 125
// characters, which SmartGo took before groups were held to 120 (their
// retry topic's limit), is in the broker's subscriptionGroup.json from
// before the upgrade. After it the broker still takes the group's
// rocketmq-client-go consumer (it used to refuse its heartbeat, so the
// consumer got nothing), and a message the consumer asks to have again
// (ConsumeRetryLater) comes again: the broker leaves the send-back
// unanswered, as the group can have no retry topic, and the client
// consumes the message again itself.
func TestInteropLongGroupKeptAfterUpgrade(t *testing.T) {
	dir := t.TempDir()
	const topic = "LongGroupUpgrade"
	s, stop := runStandaloneAt(t, dir)
	createTopic(t, s.broker, topic, 2)
	stop()

	// What the older broker had written for the group.
	long := "legacy" + strings.Repeat("g", 119)
	found, err := filepath.Glob(filepath.Join(dir, "data", "*", "config", broker.TopicConfigFile))
	if err != nil || len(found) != 1 {
		t.Fatalf("topic.json under %s: %v %v", dir, found, err)
	}
	path := filepath.Join(filepath.Dir(found[0]), broker.SubscriptionGroupFile)
	var w protocol.SubscriptionGroupWrapper
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &w); err != nil {
			t.Fatal(err)
		}
	}
	if w.SubscriptionGroupTable == nil {
		w.SubscriptionGroupTable = map[string]*protocol.SubscriptionGroupConfig{}
	}
	g := broker.DefaultSubscriptionGroup(long)
	w.SubscriptionGroupTable[long] = &g
	w.DataVersion.Counter++
	data, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	s, _ = runStandaloneAt(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	var seen []int32 // reconsume times of each delivery
	newPushConsumer(t, s, long, "gu-long", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.ReconsumeTimes)
		if len(seen) == 1 {
			return consumer.ConsumeRetryLater
		}
		return consumer.ConsumeSuccess
	})
	p := newProducer(t, s, "group-upgrade")
	if res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("again"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}
	testutil.WaitFor(t, 80*time.Second, "the kept 125-character group's consumer to get the message again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 2
	})
	if !s.logContains("send-back of a group longer than the limit") {
		t.Error("the broker did not say why it left the send-back unanswered")
	}
}
