package rocketmq

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// undecided answers UNKNOW to every question, counting the check-backs.
type undecided struct{ checks atomic.Int32 }

func (u *undecided) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return primitive.UnknowState
}

func (u *undecided) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	u.checks.Add(1)
	return primitive.UnknowState
}

// TestInteropTransactionCheckMax: a rocketmq-client-go transaction
// producer that never decides is checked back broker.transaction_check_max
// times (here 2) and no more; the half message is then discarded (logged
// as such) and never delivered, while a plain message sent after it is.
func TestInteropTransactionCheckMax(t *testing.T) {
	s := startStandalone(t, "-set", "broker.transaction_timeout=1s", "-set", "broker.transaction_check_interval=300ms",
		"-set", "broker.transaction_check_max=2")
	const topic, group = "InteropTxMax", "interop-tx-max-cg"
	createTopic(t, s.broker, topic, 1)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	l := &undecided{}
	tp := newTxProducer(t, s.registry, "interop-tx-max", "tx-max-prod", l)
	t.Cleanup(func() { _ = tp.Shutdown() })
	res, err := tp.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte("undecided")))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %+v %v", res, err)
	}
	var got received
	newPushConsumer(t, s, group, "cons-tx-max", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	// The Go client registers its producer group with its heartbeat
	// (every 30 s): the check-backs may wait for it.
	testutil.WaitFor(t, 90*time.Second, "the half message discarded", func() bool {
		return s.logContains("half message discarded")
	})
	// Checks are asked every 300 ms: a third would come well within 2 s.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if n := l.checks.Load(); n > 2 {
			t.Fatalf("%d check-backs, more than transaction_check_max=2", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := l.checks.Load(); n != 2 {
		t.Errorf("%d check-backs, want transaction_check_max=2", n)
	}
	p := newProducer(t, s, "prod-tx-max")
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("after"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the plain message", func() bool { return got.get("after") != nil })
	if got.get("undecided") != nil {
		t.Error("the discarded transaction's message was delivered")
	}
}
