package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// bodyListener decides by body: "commit", "rollback", "unknown" (then
// the check commits), "panic" (then the check commits).
type bodyListener struct {
	mu      sync.Mutex
	checked map[string]int // body -> checks answered
	ids     map[string]string
}

func (l *bodyListener) ExecuteLocalTransaction(_ context.Context, m *Message) LocalTransactionState {
	l.mu.Lock()
	l.ids[string(m.Body)] = m.Properties[TransactionIDProperty]
	l.mu.Unlock()
	switch string(m.Body) {
	case "commit":
		return TransactionCommit
	case "rollback":
		return TransactionRollback
	case "panic":
		panic("local transaction failed")
	}
	return TransactionUnknown
}

func (l *bodyListener) CheckLocalTransaction(_ context.Context, m *MessageExt) LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked[string(m.Body)]++
	if l.ids[string(m.Body)] != m.MsgID {
		return TransactionRollback // not the transaction it ran
	}
	return TransactionCommit
}

func (l *bodyListener) checks(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[body]
}

func TestClientTransactionProducer(t *testing.T) {
	c := startCluster(t, cluster.Options{TransactionChecks: 100 * time.Millisecond})
	createTopic(t, c, 1, "TxOrders", 2)
	l := &bodyListener{checked: map[string]int{}, ids: map[string]string{}}
	tp, err := NewTransactionProducer(ProducerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "tx-pg"}, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	ctx := testCtx(t, 60*time.Second)
	want := map[string]LocalTransactionState{"commit": TransactionCommit, "rollback": TransactionRollback,
		"unknown": TransactionUnknown, "panic": TransactionUnknown}
	for body, state := range want {
		res, err := tp.SendMessageInTransaction(ctx, &Message{Topic: "TxOrders", Body: []byte(body), Tags: "T",
			Properties: map[string]string{"k": body}})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if res.State != state || res.EndError != nil || res.TransactionID == "" || res.TransactionID != res.MsgID {
			t.Fatalf("%s: %+v", body, res)
		}
	}
	col := newCollector()
	newTestPush(t, c, "tx-cg", "TxOrders", "*", col.handler, func(o *ConsumerOptions) { o.From = ConsumeFromFirst })
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, b := range []string{"commit", "unknown", "panic"} {
			if col.count(b) != 1 {
				return fmt.Errorf("%s received %d times", b, col.count(b))
			}
		}
		return nil
	})
	if col.count("rollback") != 0 || l.checks("commit") != 0 || l.checks("rollback") != 0 {
		t.Fatalf("rollback delivered %d times; checks of settled: %d, %d", col.count("rollback"), l.checks("commit"), l.checks("rollback"))
	}
	col.mu.Lock()
	for _, m := range col.order {
		if m.Property("TRAN_MSG") != "" || m.Property("REAL_TOPIC") != "" || m.Property("k") != string(m.Body) {
			t.Errorf("delivered %s with properties %q", m.Body, m.RawProperties)
		}
	}
	col.mu.Unlock()
	if _, err := tp.SendMessageInTransaction(ctx, &Message{Topic: "TxOrders", Body: []byte("x"), DelayLevel: 2}); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("delayed transactional message: %v", err)
	}
	if _, err := NewTransactionProducer(ProducerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}}, nil); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("nil listener: %v", err)
	}
}

// unknownThenGone leaves every transaction unknown.
type unknownListener struct{ checked chan string }

func (unknownListener) ExecuteLocalTransaction(context.Context, *Message) LocalTransactionState {
	return TransactionUnknown
}

func (l unknownListener) CheckLocalTransaction(_ context.Context, m *MessageExt) LocalTransactionState {
	select {
	case l.checked <- string(m.Body):
	default:
	}
	return TransactionCommit
}

// The broker asks any producer of the group: the one that sent the half
// message may be gone.
func TestClientTransactionCheckedByAnotherProducer(t *testing.T) {
	c := startCluster(t, cluster.Options{TransactionChecks: 100 * time.Millisecond})
	createTopic(t, c, 1, "TxHandover", 1)
	opts := ProducerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs(), InstanceName: "first"}, Group: "tx-hand"}
	first, err := NewTransactionProducer(opts, unknownListener{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 60*time.Second)
	if _, err := first.SendMessageInTransaction(ctx, &Message{Topic: "TxHandover", Body: []byte("handed-over")}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := unknownListener{checked: make(chan string, 1)}
	opts.InstanceName = "second"
	tp, err := NewTransactionProducer(opts, second)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	// Known to the broker through its heartbeat.
	if err := tp.Register(ctx, "TxHandover"); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-second.checked:
		if body != "handed-over" {
			t.Fatalf("checked %q", body)
		}
	case <-ctx.Done():
		t.Fatal("the second producer was never asked")
	}
	col := newCollector()
	newTestPush(t, c, "tx-hand-cg", "TxHandover", "*", col.handler, func(o *ConsumerOptions) { o.From = ConsumeFromFirst })
	testutil.Eventually(t, 30*time.Second, func() error {
		if col.count("handed-over") != 1 {
			return errors.New("not delivered")
		}
		return nil
	})
}
