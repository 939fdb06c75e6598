package rocketmq

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// newSQLConsumer starts a Go-client push consumer subscribed with a SQL92
// MessageSelector that records what it receives in r.
func newSQLConsumer(t *testing.T, s *standalone, group, topic, expr string, r *received) {
	t.Helper()
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	newSelectorConsumer(t, s, group, "cons-"+group, topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: expr},
		consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
			r.add(m)
			return consumer.ConsumeSuccess
		})
}

// The Go client's SQL92 MessageSelector: the subscription travels in the
// heartbeat and its pulls do not carry it, so the broker filters by the
// registered selector. Each consumer gets exactly its matching messages; a
// malformed selector is refused (and logged) at the heartbeat.
func TestInteropSQL92Selector(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropSQL"
	createTopic(t, s.broker, topic, 4)
	p := newProducer(t, s, "prod-sql")
	type props struct {
		n      int
		region string
		tag    string
	}
	var sent []props
	for i := 0; i < 60; i++ {
		pr := props{n: i, region: []string{"eu", "us", "ap"}[i%3], tag: []string{"TagA", "TagB"}[i%2]}
		m := primitive.NewMessage(topic, []byte("sql-"+strconv.Itoa(i)))
		m.WithTag(pr.tag)
		m.WithProperty("n", strconv.Itoa(pr.n))
		m.WithProperty("region", pr.region)
		if i%5 == 0 {
			m.WithProperty("vip", "true")
		}
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, pr)
	}
	cases := []struct {
		group, expr string
		match       func(i int, p props) bool
	}{
		{"interop-sql-range", "n >= 40 AND region IN ('eu', 'us')", func(i int, p props) bool { return p.n >= 40 && p.region != "ap" }},
		{"interop-sql-tag", "TAGS = 'TagA' AND n BETWEEN 10 AND 20", func(i int, p props) bool { return p.tag == "TagA" && p.n >= 10 && p.n <= 20 }},
		{"interop-sql-null", "vip IS NOT NULL AND vip = TRUE", func(i int, p props) bool { return i%5 == 0 }},
	}
	got := make([]*received, len(cases))
	for i, c := range cases {
		got[i] = &received{}
		newSQLConsumer(t, s, c.group, topic, c.expr, got[i])
	}
	for i, c := range cases {
		want := map[string]bool{}
		for j, pr := range sent {
			if c.match(j, pr) {
				want["sql-"+strconv.Itoa(j)] = true
			}
		}
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%q to get its %d messages", c.expr, len(want)),
			func() bool { return got[i].distinct() >= len(want) })
		got[i].mu.Lock()
		for body := range got[i].msgs {
			if !want[body] {
				t.Errorf("%q received %s, which does not match", c.expr, body)
			}
		}
		if len(got[i].msgs) != len(want) {
			t.Errorf("%q received %d distinct messages, want %d", c.expr, len(got[i].msgs), len(want))
		}
		got[i].mu.Unlock()
	}

	var none received
	newSQLConsumer(t, s, "interop-sql-bad", topic, "n > 'forty'", &none)
	testutil.WaitFor(t, 30*time.Second, "the broker to log the refused selector", func() bool {
		return s.logContains("subscription refused") && s.logContains("interop-sql-bad")
	})
	if n := none.distinct(); n != 0 {
		t.Errorf("the consumer with a malformed selector received %d messages", n)
	}
}
