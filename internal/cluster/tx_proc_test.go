//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// fastTx are the broker settings of these tests: half messages are
// checked back 300 ms after they are born, every 300 ms.
var fastTx = []string{"-set", "broker.transaction_timeout=300ms", "-set", "broker.transaction_check_interval=300ms"}

// settledImmunity is the CHECK_IMMUNITY_TIME_IN_SECONDS of the messages
// whose local transactions end at once. On a busy machine more than
// fastTx's 300 ms can pass between a half message and its
// END_TRANSACTION, and a check-back in that window is legitimate (the
// outcome is not in the log yet); a test counting such a check as a
// settled transaction checked back failed that way under load. The broker
// may check them only once this has passed since their birth, so a test
// saying they were never checked back waits that long first
// (waitPastImmunity).
const settledImmunity = 3 * time.Second

// settledMessage is a message of topic whose transaction the test ends at
// once: it carries settledImmunity.
func settledMessage(topic, body string) *client.Message {
	return &client.Message{Topic: topic, Body: []byte(body),
		Properties: map[string]string{record.PropertyCheckImmunityTimeInSeconds: strconv.Itoa(int(settledImmunity / time.Second))}}
}

// waitPastImmunity returns once a broker with fastTx would have checked
// back a transaction sent at sent, had it been left pending. Proving that
// something does not happen takes the time it would take.
func waitPastImmunity(sent time.Time) {
	time.Sleep(time.Until(sent.Add(settledImmunity + 3*300*time.Millisecond)))
}

// killListener is a transaction listener answering per body (missing:
// unknown), counting the checks per body, and able to hold the first
// local transaction or check of a body until the test released it.
type killListener struct {
	mu      sync.Mutex
	exec    map[string]client.LocalTransactionState
	check   map[string]client.LocalTransactionState
	checked map[string]int
	gates   map[string]gate
}

type gate struct{ entered, release chan struct{} }

func newKillListener() *killListener {
	return &killListener{exec: map[string]client.LocalTransactionState{}, check: map[string]client.LocalTransactionState{},
		checked: map[string]int{}, gates: map[string]gate{}}
}

func (l *killListener) set(body string, exec, check client.LocalTransactionState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exec[body], l.check[body] = exec, check
}

// gate makes the next local transaction or check of body wait until
// release is closed; entered is closed when it starts waiting.
func (l *killListener) gate(body string) (entered <-chan struct{}, release chan<- struct{}) {
	g := gate{make(chan struct{}), make(chan struct{})}
	l.mu.Lock()
	l.gates[body] = g
	l.mu.Unlock()
	return g.entered, g.release
}

func (l *killListener) pass(body string) {
	l.mu.Lock()
	g, ok := l.gates[body]
	delete(l.gates, body)
	l.mu.Unlock()
	if ok {
		close(g.entered)
		<-g.release
	}
}

func (l *killListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) client.LocalTransactionState {
	l.pass(string(m.Body))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exec[string(m.Body)]
}

func (l *killListener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) client.LocalTransactionState {
	l.mu.Lock()
	l.checked[string(m.Body)]++
	l.mu.Unlock()
	l.pass(string(m.Body))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.check[string(m.Body)]
}

func (l *killListener) checks(body string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked[body]
}

func txProducer(t *testing.T, reg string, l client.TransactionListener) *client.TransactionProducer {
	t.Helper()
	po := client.DefaultProducerOptions(reg)
	po.Group = "tx-kill"
	po.HeartbeatInterval = 200 * time.Millisecond // known again soon after a broker restart
	po.SendTimeout = 2 * time.Second
	tp, err := client.NewTransactionProducer(po, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	return tp
}

// deliveries consumes topic from its first offset with a fresh group and
// returns how often each body arrived, once count messages did (and a
// moment passed for duplicates to show).
func deliveries(t *testing.T, reg, topic string, count int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	total := 0
	co := client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{reg}},
		Group: "tx-check-" + strconv.FormatInt(time.Now().UnixNano(), 36), From: client.ConsumeFromFirst}
	pc, err := client.NewPushConsumer(co, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)]++
			total++
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if total < count {
			return fmt.Errorf("%d of %d messages", total, count)
		}
		return nil
	})
	// Any duplicate is in the same queues, right behind.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	out := map[string]int{}
	for k, v := range got {
		out[k] = v
	}
	return out
}

// endAgain sends END_TRANSACTION (commit) for a half message a
// transaction send returned.
func endAgain(t *testing.T, addr string, res *client.TransactionSendResult) *protocol.Command {
	t.Helper()
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	_, phy, err := record.ParseOffsetMessageID(res.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{
		ProducerGroup: "tx-kill", TranStateTableOffset: res.QueueOffset, CommitLogOffset: phy,
		CommitOrRollback: record.TxCommit, MsgID: res.MsgID}, nil))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestClusterProcTransactionKill9 kills the broker (SIGKILL) at each step
// of a transaction: after the half message was stored (the local
// transaction still running), right after END_TRANSACTION, and while a
// check-back is being answered. After the restarts every committed
// message is delivered exactly once, rolled back ones never, and settled
// transactions are not checked back.
func TestClusterProcTransactionKill9(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	addr := "127.0.0.1:" + strconv.Itoa(ports[1])
	start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	args := append([]string{"broker", "-listen", addr, "-data", filepath.Join(dir, "b"), "-registries", reg,
		"-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1"}, fastTx...)
	b := start(t, dir, "broker", args...)
	l := newKillListener()
	tp := txProducer(t, reg, l)
	ctx := context.Background()
	const topic = "TxKill"
	send := func(m *client.Message) *client.TransactionSendResult {
		t.Helper()
		var res *client.TransactionSendResult
		testutil.Eventually(t, 30*time.Second, func() error {
			var err error
			res, err = tp.SendMessageInTransaction(ctx, m)
			return err
		})
		return res
	}
	// sendHeld sends body in the background with its local transaction
	// held; it returns once the half message is stored.
	sendHeld := func(body string) (release chan<- struct{}, done <-chan *client.TransactionSendResult) {
		entered, rel := l.gate(body)
		out := make(chan *client.TransactionSendResult, 1)
		go func() {
			res, err := tp.SendMessageInTransaction(ctx, &client.Message{Topic: topic, Body: []byte(body)})
			if err != nil {
				t.Errorf("%s: %v", body, err)
			}
			out <- res
		}()
		<-entered
		return rel, out
	}
	restart := func() {
		t.Helper()
		b.kill()
		b.run(t)
		testutil.Eventually(t, 30*time.Second, func() error { return tp.Register(ctx, topic) })
	}
	l.set("warm", client.TransactionCommit, client.TransactionCommit)
	warmSent := time.Now()
	send(settledMessage(topic, "warm"))

	// 1. After the half message: the local transactions end while the
	// broker is down, END_TRANSACTION is lost; the restarted broker
	// checks back.
	l.set("after-half", client.TransactionCommit, client.TransactionCommit)
	l.set("after-half-rb", client.TransactionRollback, client.TransactionRollback)
	rel1, done1 := sendHeld("after-half")
	rel2, done2 := sendHeld("after-half-rb")
	b.kill()
	close(rel1)
	close(rel2)
	for _, d := range []<-chan *client.TransactionSendResult{done1, done2} {
		if res := <-d; res != nil && res.EndError == nil {
			t.Errorf("%s: END_TRANSACTION reached a killed broker", res.MsgID)
		}
	}
	b.run(t)
	testutil.Eventually(t, 30*time.Second, func() error { return tp.Register(ctx, topic) })
	testutil.Eventually(t, 30*time.Second, func() error {
		if l.checks("after-half") == 0 || l.checks("after-half-rb") == 0 {
			return fmt.Errorf("checks: %d, %d", l.checks("after-half"), l.checks("after-half-rb"))
		}
		return nil
	})

	// 2. Right after END_TRANSACTION.
	l.set("after-end", client.TransactionCommit, client.TransactionRollback) // a check would roll it back
	endSent := time.Now()
	endRes := send(settledMessage(topic, "after-end"))
	if endRes.EndError != nil {
		t.Fatalf("after-end: %v", endRes.EndError)
	}
	restart()

	// 3. During a check-back: the broker dies while the producer answers.
	l.set("during-check", client.TransactionUnknown, client.TransactionCommit)
	send(&client.Message{Topic: topic, Body: []byte("during-check")})
	entered, rel := l.gate("during-check")
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("during-check was never checked back")
	}
	b.kill()
	close(rel)
	b.run(t)
	testutil.Eventually(t, 30*time.Second, func() error { return tp.Register(ctx, topic) })
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := l.checks("during-check"); n < 2 {
			return fmt.Errorf("during-check checked %d times", n)
		}
		return nil
	})

	got := deliveries(t, reg, topic, 4)
	for _, body := range []string{"warm", "after-half", "after-end", "during-check"} {
		if got[body] != 1 {
			t.Errorf("%s delivered %d times, want once", body, got[body])
		}
	}
	if got["after-half-rb"] != 0 || len(got) != 4 {
		t.Errorf("deliveries %v", got)
	}
	waitPastImmunity(warmSent)
	waitPastImmunity(endSent)
	if n := l.checks("after-end") + l.checks("warm"); n != 0 {
		t.Errorf("settled transactions checked back %d times", n)
	}
	if resp := endAgain(t, addr, endRes); resp.Code != protocol.TransactionFailed {
		t.Errorf("END_TRANSACTION again after the restart: %d %q", resp.Code, resp.Remark)
	}
}

// TestClusterProcTransactionMasterToSlave: the transaction state is in the
// log, so it ships with it. Halves settled on a master and one still
// pending are on its slave; with the master killed and the slave
// restarted as the group's master, the settled ones stay settled and the
// pending one is checked back by the new master and committed once.
func TestClusterProcTransactionMasterToSlave(t *testing.T) {
	c := startProcCluster(t, "sync_master", append([]string{"-set", "broker.slave_sync_interval=300ms"}, fastTx...)...)
	c.waitSlaveConnected(t)
	l := newKillListener()
	tp := txProducer(t, c.reg, l)
	ctx := context.Background()
	const topic = "TxSwitch"
	l.set("committed", client.TransactionCommit, client.TransactionRollback)
	l.set("rolled-back", client.TransactionRollback, client.TransactionCommit)
	l.set("pending", client.TransactionUnknown, client.TransactionCommit)
	results := map[string]*client.TransactionSendResult{}
	settledSent := time.Now()
	for _, body := range []string{"committed", "rolled-back", "pending"} {
		m := settledMessage(topic, body)
		if body == "pending" {
			m = &client.Message{Topic: topic, Body: []byte(body)}
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			res, err := tp.SendMessageInTransaction(ctx, m)
			results[body] = res
			return err
		})
	}
	c.waitCaughtUp(t)
	// The slave copies the topic's configuration every 300 ms.
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	testutil.Eventually(t, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := rc.Invoke(cctx, c.slaveAddr(), protocol.NewRequest(protocol.GetAllTopicConfig, nil, nil))
		if err != nil {
			return err
		}
		var w protocol.TopicConfigSerializeWrapper
		if err := protocol.DecodeJSON(resp.Body, &w); err != nil {
			return err
		}
		if w.TopicConfigTable[topic] == nil {
			return fmt.Errorf("the slave has no configuration of %s yet", topic)
		}
		return nil
	})
	if n := l.checks("pending"); n != 0 {
		t.Fatalf("checked on the master (default interval): %d", n)
	}
	c.master.kill()
	c.restartSlaveAsMaster(t)
	testutil.Eventually(t, 30*time.Second, func() error { return tp.Register(ctx, topic) })
	testutil.Eventually(t, 30*time.Second, func() error {
		if l.checks("pending") == 0 {
			return fmt.Errorf("pending not checked by the new master")
		}
		return nil
	})
	got := deliveries(t, c.reg, topic, 2)
	if got["committed"] != 1 || got["pending"] != 1 || got["rolled-back"] != 0 {
		t.Errorf("deliveries after the switch: %v", got)
	}
	waitPastImmunity(settledSent)
	if n := l.checks("committed") + l.checks("rolled-back"); n != 0 {
		t.Errorf("settled transactions checked back %d times", n)
	}
	if resp := endAgain(t, c.slaveAddr(), results["committed"]); resp.Code != protocol.TransactionFailed {
		t.Errorf("END_TRANSACTION again on the new master: %d %q", resp.Code, resp.Remark)
	}
}

// restartSlaveAsMaster makes the slave the group's master: restarted on
// its own data with the master's id and role.
func (c *procCluster) restartSlaveAsMaster(t *testing.T) {
	t.Helper()
	c.slave.stop()
	for i, a := range c.slave.args {
		switch a {
		case "broker.role=slave":
			c.slave.args[i] = "broker.role=async_master"
		case "broker.id=1":
			c.slave.args[i] = "broker.id=0"
		}
	}
	c.slave.run(t)
}
