package rocketmq

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// gatedListener holds the local transaction of "gated-*" bodies until
// released (then commits them), commits "commit-*" at once and leaves
// "even-*" and "odd-*" open; a check-back commits gated, commit and even
// bodies and rolls back odd ones.
type gatedListener struct {
	parityListener
	entered chan string
	release chan struct{}
}

func (l *gatedListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if strings.HasPrefix(string(m.Body), "gated-") {
		l.entered <- string(m.Body)
		<-l.release
		return primitive.CommitMessageState
	}
	return l.parityListener.ExecuteLocalTransaction(m)
}

func (l *gatedListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	if strings.HasPrefix(string(m.Body), "gated-") {
		l.mu.Lock()
		l.checked[string(m.Body)]++
		l.mu.Unlock()
		return primitive.CommitMessageState
	}
	return l.parityListener.CheckLocalTransaction(m)
}

// TestInteropControllerTransactionsAcrossFailover: rocketmq-client-go's
// transaction producer sends half messages to the master of a
// controller-mode group (sync_master); some are settled, some left open,
// and some are between the half message and the commit (the local
// transaction still running) when the master is killed with SIGKILL. The
// slave is promoted; its check-backs reach the producer, whose answers
// settle every open transaction. The consumer gets every committed
// message (the ones whose END_TRANSACTION died with the master too) and
// none of the rolled-back ones.
func TestInteropControllerTransactionsAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t, "broker.transaction_timeout=3s", "broker.transaction_check_interval=300ms",
		"broker.transaction_check_max=1000")
	m := c.waitHealthy(t)
	const topic, group, pgroup = "CtlTx", "ctl-tx-cg", "ctl-tx"
	for _, tp := range []string{topic, "%RETRY%" + group} {
		if out, err := c.smartgoAdmin(t, "topic", "create", "-t", tp, "-r", "2", "-w", "2"); err != nil {
			t.Fatalf("admin topic create %s: %v\n%s", tp, err, out)
		}
	}
	l := &gatedListener{parityListener: parityListener{checked: map[string]int{}},
		entered: make(chan string), release: make(chan struct{})}
	p := newTxProducer(t, c.registry, pgroup, "ctl-tx-1", l)
	t.Cleanup(func() { _ = p.Shutdown() })
	const n = 6
	sendTxRounds(t, p, topic, n)
	// Gated transactions: half message acknowledged, local transaction
	// running when the master dies.
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("gated-%d", i)
			res, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
			if err != nil || res.Status != primitive.SendOK {
				t.Errorf("%s: %+v %v", body, res, err)
			}
		}()
	}
	for range n {
		select {
		case <-l.entered:
		case <-time.After(60 * time.Second):
			t.Fatal("gated transactions did not reach their local transaction")
		}
	}
	c.brokers[m].kill9()
	close(l.release) // their END_TRANSACTION goes to the dead master
	wg.Wait()
	c.waitMasterIs(t, 1-m)

	var got received
	newPushConsumer(t, c.clients(), group, "ctl-tx-c", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	// The producer registers with the new master at its next heartbeat
	// (every 30 s); check-backs may wait for it.
	waitSettled(t, &got, &l.parityListener, n, "commit", "even", "gated")
	t.Logf("%d committed messages consumed (%d deliveries); check-backs: %v", got.distinct(), got.n.Load(), l.checked)
}
