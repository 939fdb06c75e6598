package rocketmq

import (
	"context"
	"fmt"
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

// parityListener settles "commit-*" bodies locally and leaves the rest
// open; a check-back commits "even-*" and rolls back "odd-*".
type parityListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *parityListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if strings.HasPrefix(string(m.Body), "commit-") {
		return primitive.CommitMessageState
	}
	return primitive.UnknowState
}

func (l *parityListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	switch {
	case strings.HasPrefix(string(m.Body), "even-"), strings.HasPrefix(string(m.Body), "commit-"):
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func (l *parityListener) checks(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for b, c := range l.checked {
		if strings.HasPrefix(b, prefix) && c > 0 {
			n++
		}
	}
	return n
}

func newTxProducer(t *testing.T, registry, group, instance string, l primitive.TransactionListener) rocketmq.TransactionProducer {
	t.Helper()
	tp, err := producer.NewTransactionProducer(l,
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{registry})),
		producer.WithGroupName(group), producer.WithInstanceName(instance), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestInteropTransactionsAcrossKill9: rocketmq-client-go's transaction
// producer leaves half messages open (and commits some locally), the
// broker is killed with SIGKILL and restarted, and the producer that sent
// them is gone: another producer of the same group answers the broker's
// check-backs. The consumer gets every committed message and none of the
// rolled-back ones.
func TestInteropTransactionsAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	// Checks that find no producer of the group connected count too
	// (as in RocketMQ): the limit leaves the second producer time to
	// connect.
	k := startKillable(t, "broker.transaction_timeout=3s", "broker.transaction_check_interval=300ms",
		"broker.transaction_check_max=1000")
	const topic, group, pgroup = "InteropTxKill", "interop-txk-cg", "interop-txk"
	createTopic(t, k.broker, topic, 2)
	createTopic(t, k.broker, "%RETRY%"+group, 1)

	first := newTxProducer(t, k.registry, pgroup, "txk-1", &parityListener{checked: map[string]int{}})
	const n = 10
	sendTxRounds(t, first, topic, n)
	_ = first.Shutdown() // the producer that sent the half messages is gone
	k.kill9Restart(t)

	l := &parityListener{checked: map[string]int{}}
	second := newTxProducer(t, k.registry, pgroup, "txk-2", l)
	t.Cleanup(func() { _ = second.Shutdown() })
	// A transaction producer heartbeats to the brokers of the topics it
	// sent to: the second one sends once.
	if res, err := second.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte("commit-probe"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("commit-probe: %+v %v", res, err)
	}
	var got received
	newPushConsumer(t, &k.standalone, group, "txk-c", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	// The Go client registers its producer group with its heartbeat
	// (every 30 s): the check-backs may wait for it.
	waitSettled(t, &got, l, n, "commit", "even")
	t.Logf("%d committed messages consumed (%d deliveries); check-backs answered by the second producer: %v", got.distinct(), got.n.Load(), l.checked)
}

// sendTxRounds sends n rounds of three transactional messages to topic
// through p: bodies commit-<i>, even-<i> and odd-<i>, each acknowledged
// as sent (what parityListener then decides for them).
func sendTxRounds(t *testing.T, p rocketmq.TransactionProducer, topic string, n int) {
	t.Helper()
	for i := range n {
		for _, kind := range []string{"commit", "even", "odd"} {
			body := fmt.Sprintf("%s-%d", kind, i)
			res, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
			if err != nil || res.Status != primitive.SendOK {
				t.Fatalf("%s: %+v %v", body, res, err)
			}
		}
	}
}

// waitSettled waits until got holds kind-i for every committed kind and
// i < n, and l has checked back all n odd-i (to roll them back); then it
// checks that no odd-i was delivered.
func waitSettled(t *testing.T, got *received, l *parityListener, n int, committed ...string) {
	t.Helper()
	missing := func() []string {
		var out []string
		for i := range n {
			for _, kind := range committed {
				if b := fmt.Sprintf("%s-%d", kind, i); got.get(b) == nil {
					out = append(out, b)
				}
			}
		}
		return out
	}
	testutil.Eventually(t, 120*time.Second, func() error {
		if m := missing(); len(m) > 0 {
			return fmt.Errorf("committed messages not consumed: %v", m)
		}
		if c := l.checks("odd-"); c < n {
			return fmt.Errorf("%d of %d open transactions to roll back checked", c, n)
		}
		return nil
	})
	// A rolled-back message would have been delivered with the committed
	// ones checked in the same rounds; give the consumer one more round.
	time.Sleep(2 * time.Second)
	for i := range n {
		if b := fmt.Sprintf("odd-%d", i); got.get(b) != nil {
			t.Errorf("rolled-back %s was delivered", b)
		}
	}
}
