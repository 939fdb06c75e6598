package rocketmq

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropConsumerGroupNameFitsItsRetryTopic: a consumer group's
// retry topic is %RETRY%<group>, and a topic has at most 127 characters,
// so a group has at most 120. A rocketmq-client-go consumer of a 120
// character group that asks for a message again gets it again; one of
// 121 is refused (its heartbeat, so the broker never has the group), as
// is `smartgo admin group create` of it. The brokers used to take groups
// of up to 127 characters: a message such a consumer asked to have again
// was lost, as the retry topic could not be created.
func TestInteropConsumerGroupNameFitsItsRetryTopic(t *testing.T) {
	s := startStandalone(t)
	const topic = "GroupNameLength"
	createTopic(t, s.broker, topic, 2)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{s.registry})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	longest, over := "g"+strings.Repeat("x", 119), "g"+strings.Repeat("y", 120)
	var mu sync.Mutex
	deliveries := map[string][]int32{} // group -> reconsume times seen
	for _, group := range []string{longest, over} {
		newPushConsumer(t, s, group, "gn-"+group[:2], topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			deliveries[group] = append(deliveries[group], m.ReconsumeTimes)
			if len(deliveries[group]) == 1 {
				return consumer.ConsumeRetryLater
			}
			return consumer.ConsumeSuccess
		})
	}
	p := newProducer(t, s, "group-name")
	if res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("again"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}
	testutil.WaitFor(t, 80*time.Second, "the 120-character group's consumer to get the message again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		d := deliveries[longest]
		return len(d) >= 2 && d[len(d)-1] >= 1
	})
	w, err := adm.GetAllSubscriptionGroup(ctx, s.broker, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.SubscriptionGroupTable[over]; ok {
		t.Error("the broker took the 121-character group")
	}
	mu.Lock()
	if n := len(deliveries[over]); n > 0 {
		t.Errorf("the 121-character group's consumer got %d deliveries", n)
	}
	mu.Unlock()
	out, err := exec.Command(smartgoBinary(t), "admin", "group", "create", "-g", over, "-registry", s.registry).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "at most 120") { // the broker refuses a new one
		t.Errorf("admin group create of 121 characters: %v\n%s", err, out)
	}
}
