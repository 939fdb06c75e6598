package rocketmq

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// txListener decides by body and counts the broker's check-backs.
type txListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	if string(m.Body) == "unknown-then-commit" {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func (l *txListener) checks(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[body]
}

// The Go client's transaction producer: local commit and rollback, and
// outcomes the broker learns by checking back (CHECK_TRANSACTION_STATE
// to the producer, END_TRANSACTION from its checker). Consumers see
// exactly the committed messages, under the id the send returned; a
// second END_TRANSACTION, or one for an offset holding no half message,
// is refused with a clear code and logged.
func TestInteropTransactionProducer(t *testing.T) {
	// The timeout leaves room for the client's END_TRANSACTION, a oneway
	// sent after the local transaction, on a busy machine: a transaction
	// still open when it expires is checked back, rightly, settled or not
	// on the client's side.
	s := startStandalone(t, "-set", "broker.transaction_timeout=3s", "-set", "broker.transaction_check_interval=300ms")
	const topic = "InteropTx"
	createTopic(t, s.broker, topic, 2)
	l := &txListener{checked: map[string]int{}}
	tp := newTxProducer(t, s.registry, "interop-tx", "tx-prod", l)
	t.Cleanup(func() { _ = tp.Shutdown() })
	ctx := context.Background()
	results := map[string]*primitive.TransactionSendResult{}
	for _, body := range []string{"commit", "rollback", "unknown-then-commit", "unknown-then-rollback"} {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithTag("TagTx")
		res, err := tp.SendMessageInTransaction(ctx, m)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("%s: %+v %v", body, res, err)
		}
		results[body] = res
	}
	var got received
	newPushConsumer(t, s, "interop-tx-cg", "cons-tx", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	createTopic(t, s.broker, "%RETRY%interop-tx-cg", 1)
	// The Go client registers its producer group with its heartbeat
	// (every 30 s): the check-backs may wait for it.
	testutil.WaitFor(t, 90*time.Second, "the two committed messages", func() bool { return got.distinct() == 2 })
	for _, body := range []string{"commit", "unknown-then-commit"} {
		m := got.get(body)
		if m == nil {
			t.Fatalf("%s not delivered", body)
		}
		if m.MsgId != results[body].MsgID || m.GetTags() != "TagTx" {
			t.Errorf("%s delivered as %s (tag %q), sent as %s", body, m.MsgId, m.GetTags(), results[body].MsgID)
		}
		if _, ok := m.GetProperties()[record.PropertyTransactionPrepared]; ok {
			t.Errorf("%s delivered with TRAN_MSG", body)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "the rollback check", func() bool { return l.checks("unknown-then-rollback") > 0 })
	if l.checks("commit") != 0 || l.checks("rollback") != 0 {
		t.Errorf("settled transactions were checked back: %v", l.checked)
	}

	// Bad input, raw: END_TRANSACTION again, and for a made-up offset.
	rc := newRemotingClient(t)
	end := func(res *primitive.TransactionSendResult, phy int64) *protocol.Command {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := rc.Invoke(cctx, s.broker, protocol.NewRequest(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{
			ProducerGroup: "interop-tx", TranStateTableOffset: res.QueueOffset, CommitLogOffset: phy,
			CommitOrRollback: record.TxCommit, MsgID: res.MsgID}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	_, phy, err := record.ParseOffsetMessageID(results["commit"].OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	if resp := end(results["commit"], phy); resp.Code != protocol.TransactionFailed || !strings.Contains(resp.Remark, "already") {
		t.Errorf("second commit: %d %q", resp.Code, resp.Remark)
	}
	if resp := end(results["commit"], phy+1); resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "no such prepared") {
		t.Errorf("commit of a made-up offset: %d %q", resp.Code, resp.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "the refusals in the broker log", func() bool {
		return s.logContains("end transaction refused: already settled") && s.logContains("end transaction refused: no such half message")
	})
	if n := got.distinct(); n != 2 {
		t.Errorf("%d distinct messages delivered after the bad requests", n)
	}
}
