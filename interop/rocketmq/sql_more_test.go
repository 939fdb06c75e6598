package rocketmq

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// sqlMsg is one message of TestInteropSQL92SelectorEdges: its properties
// (a missing one is absent from the map).
type sqlMsg map[string]string

// SQL92 selectors from rocketmq-client-go on the edges of the language,
// end to end: property values the client encodes with quotes, spaces,
// '=' and non-ASCII text, compared with escaped string literals; NULL
// (a missing property, or one sent with an empty value, which RocketMQ's
// property parser drops) in comparisons, IS NULL, NOT BETWEEN and NOT IN;
// and a property that is not a number compared with one, which makes the
// message not match whatever the rest of the selector says (RocketMQ's
// rule). Each group gets exactly the messages its selector matches. Then
// a group's consumer is restarted with another selector: what is sent
// after that is filtered by the new selector.
func TestInteropSQL92SelectorEdges(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropSQLEdges"
	// One queue: a group given a message sent after the others has been
	// given (or filtered out) every one before it.
	createTopic(t, s.broker, topic, 1)
	p := newProducer(t, s, "prod-sql-edges")
	msgs := []sqlMsg{
		{"name": "it's", "n": "1"},
		{"name": "a = b", "n": "2"},
		{"name": "naïve ☃", "n": "3"},
		{"name": "plain", "n": "4", "code": "abc"},
		{"name": "plain", "n": "5", "code": "7"},
		{"name": "plain"},
		{"n": "6"},
		{"name": "", "n": "7"},
	}
	send := func(prefix string, ms []sqlMsg) {
		t.Helper()
		for i, m := range ms {
			pm := primitive.NewMessage(topic, []byte(prefix+strconv.Itoa(i)))
			for k, v := range m {
				pm.WithProperty(k, v)
			}
			if res, err := p.SendSync(context.Background(), pm); err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send %d: %v %v", i, res, err)
			}
		}
	}
	send("edge-", msgs)
	cases := []struct {
		group, expr string
		want        []int
	}{
		{"interop-sqle-quote", "name = 'it''s'", []int{0}},
		{"interop-sqle-eq", "name = 'a = b' OR name = 'naïve ☃'", []int{1, 2}},
		{"interop-sqle-isnull", "name IS NULL", []int{6, 7}},
		{"interop-sqle-nullcmp", "n > 3", []int{3, 4, 6, 7}},
		{"interop-sqle-notnullcmp", "NOT (n > 3)", []int{0, 1, 2}},
		{"interop-sqle-notbetween", "n NOT BETWEEN 2 AND 6", []int{0, 7}},
		{"interop-sqle-notin", "name NOT IN ('plain', 'it''s')", []int{1, 2}},
		{"interop-sqle-badnum", "code > 5 OR n = 4", []int{4}},
	}
	got := make([]*received, len(cases))
	for i, c := range cases {
		got[i] = &received{}
		newSQLConsumer(t, s, c.group, topic, c.expr, got[i])
	}
	for i, c := range cases {
		w := map[string]bool{}
		for _, j := range c.want {
			w["edge-"+strconv.Itoa(j)] = true
		}
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%q to get its %d messages", c.expr, len(w)), func() bool {
			return len(got[i].withPrefix("edge-")) >= len(w)
		})
	}
	// A fence per group, matching its selector (the first message it
	// wants), sent last: when a group has its fence, it has been given
	// everything before it.
	for i, c := range cases {
		send("fence-"+strconv.Itoa(i)+"-", []sqlMsg{msgs[c.want[0]]})
	}
	for i, c := range cases {
		fence := "fence-" + strconv.Itoa(i) + "-0"
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%q to get its fence", c.expr), func() bool { return got[i].get(fence) != nil })
		w := map[string]bool{}
		for _, j := range c.want {
			w["edge-"+strconv.Itoa(j)] = true
		}
		for _, b := range got[i].withPrefix("edge-") {
			if !w[b] {
				t.Errorf("%q received %s (%v), which does not match", c.expr, b, got[i].get(b).GetProperties())
			}
		}
		if n := len(got[i].withPrefix("edge-")); n != len(w) {
			t.Errorf("%q received %d distinct messages, want %d", c.expr, n, len(w))
		}
	}
}
