package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Push consumers subscribed with a tag expression get the messages of
// their tags and no others. The Go client sends its heartbeat's codeSet as
// JSON strings; a broker that refuses them never registers the consumer,
// which then receives nothing.
func TestInteropTagFilteredConsumers(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropTags"
	createTopic(t, s.broker, topic, 4)
	p := newProducer(t, s, "prod-tags")
	want := map[string]map[string]bool{"TagA": {}, "TagB": {}, "TagC": {}}
	for i := 0; i < 6; i++ {
		for tag := range want {
			body := fmt.Sprintf("%s-%d", tag, i)
			m := primitive.NewMessage(topic, []byte(body))
			m.WithTag(tag)
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send %s: %v", body, err)
			}
			want[tag][body] = true
		}
	}
	cases := []struct {
		group, expr string
		tags        []string
	}{
		{"interop-tag-single", "TagA", []string{"TagA"}},
		{"interop-tag-or", "TagA || TagB", []string{"TagA", "TagB"}},
	}
	got := make([]*received, len(cases))
	for i, c := range cases {
		r := &received{}
		got[i] = r
		createTopic(t, s.broker, "%RETRY%"+c.group, 1)
		newTagConsumer(t, s, c.group, "cons-"+c.group, topic, c.expr, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
			r.add(m)
			return consumer.ConsumeSuccess
		})
	}
	for i, c := range cases {
		n := 0
		for _, tag := range c.tags {
			n += len(want[tag])
		}
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%s to get its %d messages", c.expr, n), func() bool { return got[i].distinct() == n })
		for _, tag := range c.tags {
			for body := range want[tag] {
				if m := got[i].get(body); m == nil || m.GetTags() != tag {
					t.Errorf("%s: %s arrived as %+v", c.expr, body, m)
				}
			}
		}
	}
	// Nothing outside the expressions arrived meanwhile.
	for i, c := range cases {
		got[i].mu.Lock()
		for body, m := range got[i].msgs {
			ok := false
			for _, tag := range c.tags {
				ok = ok || m.GetTags() == tag
			}
			if !ok {
				t.Errorf("%s received %s with tag %q", c.expr, body, m.GetTags())
			}
		}
		got[i].mu.Unlock()
	}
}
