package broker

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// sendHalf sends a transaction's half message of producer group pg, as
// the Java and Go clients do (TRAN_MSG, PGROUP, the prepared sys flag).
func (tc *testClient) sendHalf(topic string, queueID int32, body, uniq string, extra ...string) protocol.SendMessageResponseHeader {
	tc.t.Helper()
	kv := append([]string{record.PropertyTransactionPrepared, "true", record.PropertyProducerGroup, "pg",
		record.PropertyUniqueClientMessageIDKeyIndex, uniq, record.PropertyTags, "TagT"}, extra...)
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: topic, DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: queueID, SysFlag: record.TxPrepared, BornTimestamp: time.Now().UnixMilli(), Properties: props(kv...)}
	resp := tc.invoke(protocol.SendMessageV2, h.V2(), []byte(body))
	if resp.Code != protocol.Success {
		tc.t.Fatalf("send half: %d %s", resp.Code, resp.Remark)
	}
	var rh protocol.SendMessageResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil {
		tc.t.Fatal(err)
	}
	return rh
}

// endTx sends END_TRANSACTION for the half message a send answered.
func (tc *testClient) endTx(sent protocol.SendMessageResponseHeader, group string, outcome int32) *protocol.Command {
	tc.t.Helper()
	_, phy, err := record.ParseOffsetMessageID(sent.MsgID)
	if err != nil {
		tc.t.Fatal(err)
	}
	return tc.invoke(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: group, TranStateTableOffset: sent.QueueOffset,
		CommitLogOffset: phy, CommitOrRollback: outcome, MsgID: sent.MsgID}, nil)
}

func txBroker(t *testing.T, dir string, mod func(*Options)) *Broker {
	return testBroker(t, dir, func(o *Options) {
		o.TransactionTimeout = 50 * time.Millisecond
		o.TransactionCheckInterval = 100 * time.Millisecond
		o.TransactionCheckMax = 3
		if mod != nil {
			mod(o)
		}
	})
}

func TestBrokerTransactionCommitAndRollback(t *testing.T) {
	b := txBroker(t, t.TempDir(), func(o *Options) { o.TransactionCheckInterval = time.Hour })
	c := newTestClient(t, b.Addr())
	h1 := c.sendHalf("TxT", 1, "committed", "UNIQ-1", "color", "red")
	h2 := c.sendHalf("TxT", 1, "rolled-back", "UNIQ-2")
	if h1.QueueID != 1 || h1.QueueOffset != 0 || h2.QueueOffset != 1 {
		t.Fatalf("half responses %+v %+v: want the requested queue and half-topic offsets 0, 1", h1, h2)
	}
	waitDispatched(t, b, TransHalfTopic, 0, 2)
	if r := c.pull("cg", "TxT", 1, 0, flagSubscription, 0, "*"); len(r.msgs) != 0 {
		t.Fatalf("a half message is visible: %d msgs", len(r.msgs))
	}
	if resp := c.endTx(h1, "pg", record.TxCommit); resp.Code != protocol.Success {
		t.Fatalf("commit: %d %s", resp.Code, resp.Remark)
	}
	if resp := c.endTx(h2, "pg", record.TxRollback); resp.Code != protocol.Success {
		t.Fatalf("rollback: %d %s", resp.Code, resp.Remark)
	}
	waitDispatched(t, b, "TxT", 1, 1)
	r := c.pull("cg", "TxT", 1, 0, flagSubscription, 0, "*")
	if r.code != protocol.Success || len(r.msgs) != 1 {
		t.Fatalf("pull after commit: %d, %d msgs", r.code, len(r.msgs))
	}
	m := r.msgs[0]
	_, halfPhy, _ := record.ParseOffsetMessageID(h1.MsgID)
	if string(m.Body) != "committed" || m.SysFlag&record.TxMask != record.TxCommit || m.PreparedTransactionOffset != halfPhy {
		t.Fatalf("committed message: body %q sysflag %#x prepared offset %d (half at %d)", m.Body, m.SysFlag, m.PreparedTransactionOffset, halfPhy)
	}
	if propOf(m, record.PropertyUniqueClientMessageIDKeyIndex) != "UNIQ-1" || propOf(m, "color") != "red" || propOf(m, record.PropertyTags) != "TagT" ||
		hasProp(m, record.PropertyTransactionPrepared) || hasProp(m, record.PropertyRealTopic) || hasProp(m, record.PropertyRealQueueID) {
		t.Fatalf("committed message properties %q", m.Properties)
	}
	// The outcome is in the operation topic: tag d, the half's offset.
	waitDispatched(t, b, TransOpHalfTopic, 0, 2)
	ops := c.pull("cg", TransOpHalfTopic, 0, 0, flagSubscription, 0, "*")
	if len(ops.msgs) != 2 || string(ops.msgs[0].Body) != "0" || string(ops.msgs[1].Body) != "1" || propOf(ops.msgs[0], record.PropertyTags) != "d" {
		t.Fatalf("operation records: %d", len(ops.msgs))
	}

	// Settled transactions are not settled again.
	for _, x := range []struct {
		h       protocol.SendMessageResponseHeader
		outcome int32
		was     string
	}{{h1, record.TxRollback, "committed"}, {h1, record.TxCommit, "committed"}, {h2, record.TxCommit, "rolled back"}} {
		resp := c.endTx(x.h, "pg", x.outcome)
		if resp.Code != protocol.TransactionFailed || !strings.Contains(resp.Remark, "already "+x.was) {
			t.Fatalf("second END_TRANSACTION: %d %q", resp.Code, resp.Remark)
		}
	}
	// Bad input: a wrong group, a wrong queue offset, an offset with no
	// half message, an unknown outcome.
	_, phy, _ := record.ParseOffsetMessageID(h1.MsgID)
	bad := []*protocol.EndTransactionRequestHeader{
		{ProducerGroup: "other", TranStateTableOffset: 0, CommitLogOffset: phy, CommitOrRollback: record.TxCommit, MsgID: "x"},
		{ProducerGroup: "pg", TranStateTableOffset: 7, CommitLogOffset: phy, CommitOrRollback: record.TxCommit, MsgID: "x"},
		{ProducerGroup: "pg", TranStateTableOffset: 0, CommitLogOffset: 1 << 40, CommitOrRollback: record.TxCommit, MsgID: "x"},
		{ProducerGroup: "pg", TranStateTableOffset: 0, CommitLogOffset: phy + 3, CommitOrRollback: record.TxCommit, MsgID: "x"},
	}
	for i, h := range bad {
		if resp := c.invoke(protocol.EndTransaction, h, nil); resp.Code != protocol.SystemError || resp.Remark == "" {
			t.Errorf("bad END_TRANSACTION %d: %d %q", i, resp.Code, resp.Remark)
		}
	}
	waitDispatched(t, b, "TxT", 1, 1)
	if resp := c.invoke(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "pg",
		CommitLogOffset: phy, CommitOrRollback: 4, MsgID: "x"}, nil); resp.Code != protocol.SystemError {
		t.Errorf("END_TRANSACTION with outcome 4: %d %q", resp.Code, resp.Remark)
	}
	// A normal message of a committed message's id is not a half message.
	n := c.mustSend("TxT", 2, "plain", "")
	if resp := c.endTx(n, "pg", record.TxCommit); resp.Code != protocol.SystemError || !strings.Contains(resp.Remark, "no such prepared") {
		t.Errorf("END_TRANSACTION of a normal message: %d %q", resp.Code, resp.Remark)
	}
	if r := c.pull("cg", "TxT", 1, 0, flagSubscription, 0, "*"); len(r.msgs) != 1 {
		t.Fatalf("after the bad requests queue 1 holds %d messages", len(r.msgs))
	}
}

// A half message with a delay level is delivered after the delay once
// committed; a batch cannot be a half message.
func TestBrokerTransactionDelayAndBatch(t *testing.T) {
	b := txBroker(t, t.TempDir(), func(o *Options) { o.TransactionCheckInterval = time.Hour })
	c := newTestClient(t, b.Addr())
	h := c.sendHalf("TxDelay", 0, "later", "UNIQ-D", record.PropertyDelayLevel, "2")
	// The delay runs from the commit's store time, which lies between the
	// commit request's send and its answer: measured from the send, the
	// message is never delivered early (measured from the answer, which a
	// loaded machine may hand to the test tens of milliseconds late, it
	// could be). Store timestamps are whole milliseconds: the due time may
	// be up to 1 ms before the delay's exact end.
	delay := b.opts.DelayLevels[1]
	sent := time.Now()
	if resp := c.endTx(h, "pg", record.TxCommit); resp.Code != protocol.Success {
		t.Fatalf("commit: %d %s", resp.Code, resp.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "", func() bool { return b.Store().MaxOffset("TxDelay", 0) == 1 })
	if d := time.Since(sent); d < delay-time.Millisecond {
		t.Fatalf("delivered %v after the commit was sent; delay level 2 is %v", d, delay)
	}
	r := c.pull("cg", "TxDelay", 0, 0, flagSubscription, 0, "*")
	if len(r.msgs) != 1 || string(r.msgs[0].Body) != "later" || hasProp(r.msgs[0], record.PropertyTransactionPrepared) {
		t.Fatalf("delayed commit: %d msgs", len(r.msgs))
	}

	body := record.AppendBatchItem(nil, 0, []byte("x"), "")
	bh := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "TxBatch", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		Batch: true, Properties: props(record.PropertyTransactionPrepared, "true")}
	if resp := c.invoke(protocol.SendBatchMessage, bh.V2(), body); resp.Code != protocol.MessageIllegal {
		t.Fatalf("transactional batch: %d %s", resp.Code, resp.Remark)
	}
}

// txProducer is a producer connection answering CHECK_TRANSACTION_STATE
// with answer(uniq) (commit, rollback or unknown), as a transaction
// producer's checker does.
type txProducer struct {
	t      *testing.T
	rc     *remoting.Client
	addr   string
	group  string
	answer func(uniq string) int32

	mu     sync.Mutex
	checks map[string][]protocol.CheckTransactionStateRequestHeader // by UNIQ_KEY
	bodies map[string]*record.Message
}

func newTxProducer(t *testing.T, addr, group string, answer func(string) int32) *txProducer {
	t.Helper()
	p := &txProducer{t: t, addr: addr, group: group, answer: answer, checks: map[string][]protocol.CheckTransactionStateRequestHeader{},
		bodies: map[string]*record.Message{}}
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	p.rc = rc
	rc.RegisterFunc(protocol.CheckTransactionState, func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		var h protocol.CheckTransactionStateRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			t.Errorf("check header: %v", err)
			return nil, nil
		}
		m, _, err := record.Decode(req.Body, false)
		if err != nil {
			t.Errorf("check body: %v", err)
			return nil, nil
		}
		p.mu.Lock()
		p.checks[h.MsgID] = append(p.checks[h.MsgID], h)
		if p.bodies[h.MsgID] == nil {
			p.bodies[h.MsgID] = m // the first check's
		}
		p.mu.Unlock()
		end := &protocol.EndTransactionRequestHeader{ProducerGroup: group, TranStateTableOffset: h.TranStateTableOffset,
			CommitLogOffset: h.CommitLogOffset, CommitOrRollback: answer(h.MsgID), FromTransactionCheck: true, MsgID: h.MsgID, TransactionID: h.TransactionID}
		go func() {
			_ = rc.InvokeOneway(context.Background(), p.addr, protocol.NewRequest(protocol.EndTransaction, end, nil))
		}()
		return nil, nil
	})
	p.heartbeat()
	return p
}

func (p *txProducer) heartbeat() {
	body, _ := protocol.EncodeJSON(protocol.HeartbeatData{ClientID: "txp-" + p.group, ProducerDataSet: []*protocol.ProducerData{{GroupName: p.group}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := p.rc.Invoke(ctx, p.addr, protocol.NewRequest(protocol.HeartBeat, nil, body)); err != nil || resp.Code != protocol.Success {
		p.t.Fatalf("producer heartbeat: %v %v", resp, err)
	}
}

func (p *txProducer) checked(uniq string) []protocol.CheckTransactionStateRequestHeader {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]protocol.CheckTransactionStateRequestHeader(nil), p.checks[uniq]...)
}

// TestBrokerTransactionCheckBack: pending transactions are checked back
// with a producer of the group, which commits, rolls back or does not
// know; an unknown one is discarded after TransactionCheckMax checks.
//
// Checks run every 100 ms, and a transaction is checked again at each
// scan until the producer's answer has been applied: on a loaded machine
// that answer (a oneway END_TRANSACTION sent once the check was read)
// may take a few scans. So the test allows 10 checks before the discard
// (the answered transactions must be settled before it) and asserts that
// no check comes after the settlement, not how many came before it.
func TestBrokerTransactionCheckBack(t *testing.T) {
	b := txBroker(t, t.TempDir(), func(o *Options) { o.TransactionCheckMax = 10 })
	c := newTestClient(t, b.Addr())
	answers := map[string]int32{"UNIQ-C": record.TxCommit, "UNIQ-R": record.TxRollback, "UNIQ-U": record.TxNotType, "UNIQ-I": record.TxCommit}
	p := newTxProducer(t, b.Addr(), "pg", func(uniq string) int32 { return answers[uniq] })
	hc := c.sendHalf("TxCheck", 0, "checked-commit", "UNIQ-C")
	c.sendHalf("TxCheck", 0, "checked-rollback", "UNIQ-R")
	c.sendHalf("TxCheck", 0, "never-known", "UNIQ-U")
	// Its age is counted from its born timestamp, which the client takes
	// inside sendHalf (in whole milliseconds): time it from before.
	sentImmune := time.Now()
	c.sendHalf("TxCheck", 0, "immune", "UNIQ-I", record.PropertyCheckImmunityTimeInSeconds, "3")

	// Checked back and committed.
	testutil.WaitFor(t, 10*time.Second, "", func() bool { return b.Store().MaxOffset("TxCheck", 0) >= 1 })
	r := c.pull("cg", "TxCheck", 0, 0, flagSubscription, 0, "*")
	if len(r.msgs) != 1 || string(r.msgs[0].Body) != "checked-commit" {
		t.Fatalf("after the check: %d msgs", len(r.msgs))
	}
	chk := p.checked("UNIQ-C")
	if len(chk) == 0 {
		t.Fatal("no check of UNIQ-C recorded")
	}
	settledC := halfEndAtSettle(t, b, p, "UNIQ-C")
	_, firstPhy, _ := record.ParseOffsetMessageID(hc.MsgID)
	if chk[0].CommitLogOffset == firstPhy || chk[0].TranStateTableOffset <= hc.QueueOffset || chk[0].TransactionID != "UNIQ-C" ||
		chk[0].OffsetMsgID != record.OffsetMessageID(b.storeHost, chk[0].CommitLogOffset) {
		t.Fatalf("check header %+v: want a fresh copy of the half message (first at %d/%d)", chk[0], firstPhy, hc.QueueOffset)
	}
	p.mu.Lock()
	body := p.bodies["UNIQ-C"]
	p.mu.Unlock()
	if body.Topic != "TxCheck" || body.QueueID != 0 || string(body.Body) != "checked-commit" || propOf(body, record.PropertyTransactionCheckTimes) != "1" {
		t.Fatalf("check body: topic %s queue %d body %q properties %q", body.Topic, body.QueueID, body.Body, body.Properties)
	}

	// The unknown one is checked TransactionCheckMax times, then
	// discarded to TRANS_CHECK_MAX_TIME_TOPIC.
	testutil.WaitFor(t, 20*time.Second, "", func() bool { return b.Store().MaxOffset(TransCheckMax, 0) == 1 })
	if n := len(p.checked("UNIQ-U")); n != b.opts.TransactionCheckMax {
		t.Fatalf("UNIQ-U checked %d times, want %d", n, b.opts.TransactionCheckMax)
	}
	d := c.pull("cg", TransCheckMax, 0, 0, flagSubscription, 0, "*")
	if len(d.msgs) != 1 || string(d.msgs[0].Body) != "never-known" {
		t.Fatalf("discarded: %d msgs", len(d.msgs))
	}
	// Discarded, it is settled: a late answer changes nothing.
	last := p.checked("UNIQ-U")[b.opts.TransactionCheckMax-1]
	late := c.invoke(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "pg", TranStateTableOffset: last.TranStateTableOffset,
		CommitLogOffset: last.CommitLogOffset, CommitOrRollback: record.TxCommit, MsgID: "UNIQ-U"}, nil)
	if late.Code != protocol.TransactionFailed || !strings.Contains(late.Remark, "discarded") {
		t.Fatalf("late commit of a discarded transaction: %d %q", late.Code, late.Remark)
	}

	// The immune one is not checked before its 3 s.
	testutil.WaitFor(t, 20*time.Second, "", func() bool { return len(p.checked("UNIQ-I")) > 0 })
	if d := time.Since(sentImmune); d < 3*time.Second-time.Millisecond {
		t.Fatalf("checked %v after sending despite CHECK_IMMUNITY_TIME_IN_SECONDS = 3", d)
	}
	testutil.WaitFor(t, 10*time.Second, "", func() bool { return b.Store().MaxOffset("TxCheck", 0) == 2 })
	settledR := halfEndAtSettle(t, b, p, "UNIQ-R")
	// Settled, they are not checked again: every check was about a copy
	// of the half message made before the settlement.
	for key, end := range map[string]int64{"UNIQ-R": settledR, "UNIQ-C": settledC} {
		for _, h := range p.checked(key) {
			if h.TranStateTableOffset >= end {
				t.Fatalf("%s checked about the half message copy at queue offset %d, after it was settled (half topic end %d)", key, h.TranStateTableOffset, end)
			}
		}
	}
}

// halfEndAtSettle waits until the transaction key, checked at least once
// (so it was pending), is settled, and returns the end of the half topic
// then: the copies a check is made about all lie before it. Copies and
// settlements are made under tx.mu.
func halfEndAtSettle(t *testing.T, b *Broker, p *txProducer, key string) int64 {
	t.Helper()
	var end int64
	testutil.WaitFor(t, 10*time.Second, key+" checked and settled", func() bool {
		if len(p.checked(key)) == 0 {
			return false
		}
		b.tx.mu.Lock()
		defer b.tx.mu.Unlock()
		if b.tx.pending[key] != nil {
			return false
		}
		end = b.Store().MaxOffset(TransHalfTopic, 0)
		return true
	})
	return end
}

// Without a producer of the group connected, checks are counted and the
// half message is discarded after the maximum, with a warning.
func TestBrokerTransactionNoProducer(t *testing.T) {
	var logs testutil.LogBuffer
	b := txBroker(t, t.TempDir(), func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	c := newTestClient(t, b.Addr())
	c.sendHalf("TxOrphan", 0, "orphan", "UNIQ-O")
	testutil.WaitFor(t, 20*time.Second, "", func() bool { return b.Store().MaxOffset(TransCheckMax, 0) == 1 })
	d := c.pull("cg", TransCheckMax, 0, 0, flagSubscription, 0, "*")
	if len(d.msgs) != 1 || propOf(d.msgs[0], record.PropertyTransactionCheckTimes) != "3" {
		t.Fatalf("discarded: %d msgs", len(d.msgs))
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool {
		l := logs.String()
		return strings.Contains(l, "level=WARN") && strings.Contains(l, "half message discarded to "+TransCheckMax) &&
			strings.Contains(l, "key=UNIQ-O") && strings.Contains(l, "checks=3")
	})
}

// The state survives a restart: settled transactions stay settled, a
// pending one is checked back and committed once.
func TestBrokerTransactionRestart(t *testing.T) {
	dir := t.TempDir()
	slow := func(o *Options) { o.TransactionCheckInterval = time.Hour }
	b := txBroker(t, dir, slow)
	c := newTestClient(t, b.Addr())
	hc := c.sendHalf("TxR", 0, "commit-before", "UNIQ-1")
	hr := c.sendHalf("TxR", 0, "rollback-before", "UNIQ-2")
	hp := c.sendHalf("TxR", 0, "pending", "UNIQ-3")
	if c.endTx(hc, "pg", record.TxCommit).Code != protocol.Success || c.endTx(hr, "pg", record.TxRollback).Code != protocol.Success {
		t.Fatal("settle before restart")
	}
	addr := b.Addr()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The checks made before the producer's heartbeat (every 100 ms, no
	// producer to ask) count: a loaded machine may take longer than
	// TransactionCheckMax of them to get there, so the restarted broker
	// allows plenty.
	b = txBroker(t, dir, func(o *Options) { o.ListenAddr, o.HAListen, o.TransactionCheckMax = addr, "127.0.0.1:0", 1000 })
	c = newTestClient(t, b.Addr())
	for _, x := range []protocol.SendMessageResponseHeader{hc, hr} {
		if resp := c.endTx(x, "pg", record.TxCommit); resp.Code != protocol.TransactionFailed {
			t.Fatalf("after restart, END_TRANSACTION of a settled transaction: %d %q", resp.Code, resp.Remark)
		}
	}
	p := newTxProducer(t, b.Addr(), "pg", func(string) int32 { return record.TxCommit })
	testutil.WaitFor(t, 10*time.Second, "", func() bool { return b.Store().MaxOffset("TxR", 0) == 2 })
	r := c.pull("cg", "TxR", 0, 0, flagSubscription, 0, "*")
	if len(r.msgs) != 2 || string(r.msgs[0].Body) != "commit-before" || string(r.msgs[1].Body) != "pending" {
		t.Fatalf("after restart: %d msgs", len(r.msgs))
	}
	if resp := c.endTx(hp, "pg", record.TxCommit); resp.Code != protocol.TransactionFailed {
		t.Fatalf("commit of the checked transaction again: %d", resp.Code)
	}
	if n := len(p.checked("UNIQ-1")) + len(p.checked("UNIQ-2")); n != 0 {
		t.Fatalf("settled transactions checked %d times", n)
	}
}

// A crash between a committed message and its operation record leaves the
// message as the last record of the log: the restarted broker writes the
// operation record and never checks the transaction back.
func TestBrokerTransactionCrashRepair(t *testing.T) {
	dir := t.TempDir()
	b := txBroker(t, dir, func(o *Options) { o.TransactionCheckInterval = time.Hour })
	c := newTestClient(t, b.Addr())
	sent := time.Now()
	h := c.sendHalf("TxCrash", 1, "once", "UNIQ-X")
	c.sendHalf("TxCrash", 1, "control", "UNIQ-Y") // pending: checked back after the restart
	waitDispatched(t, b, TransHalfTopic, 0, 2)
	_, phy, _ := record.ParseOffsetMessageID(h.MsgID)
	half, err := b.Store().ReadMessage(phy)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := b.committedMessage(half)
	if err != nil {
		t.Fatal(err)
	}
	opts := b.opts
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What the crash left: the committed message, no operation record.
	so := opts.Store
	so.Logger = nil
	st, err := store.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutWait(context.Background(), committed, false); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Only the explicit checkOnce below checks back: a background check
	// racing it (before the producer's heartbeat, or before its rollback
	// lands) would count UNIQ-Y's checks twice or spend them.
	b = txBroker(t, dir, func(o *Options) { o.ListenAddr, o.TransactionCheckInterval = opts.ListenAddr, time.Hour })
	c = newTestClient(t, b.Addr())
	waitDispatched(t, b, TransOpHalfTopic, 0, 1) // the repair's operation record
	if resp := c.endTx(h, "pg", record.TxCommit); resp.Code != protocol.TransactionFailed || !strings.Contains(resp.Remark, "committed") {
		t.Fatalf("commit after the repair: %d %q", resp.Code, resp.Remark)
	}
	p := newTxProducer(t, b.Addr(), "pg", func(string) int32 { return record.TxRollback })
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return time.Since(sent) > 200*time.Millisecond }) // both overdue
	b.tx.checkOnce()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return len(p.checked("UNIQ-Y")) == 1 })
	if n := len(p.checked("UNIQ-X")); n != 0 {
		t.Fatalf("repaired transaction checked back %d times", n)
	}
	if n := b.Store().MaxOffset("TxCrash", 1); n != 1 {
		t.Fatalf("TxCrash holds %d messages, want the one committed", n)
	}
}

// A slave refuses END_TRANSACTION as RocketMQ's does (SLAVE_NOT_AVAILABLE)
// and does not check back.
func TestBrokerTransactionSlaveRefuses(t *testing.T) {
	b := txBroker(t, t.TempDir(), func(o *Options) { o.Role, o.BrokerID = RoleSlave, 1 })
	c := newTestClient(t, b.Addr())
	resp := c.invoke(protocol.EndTransaction, &protocol.EndTransactionRequestHeader{ProducerGroup: "pg", CommitLogOffset: 0,
		CommitOrRollback: record.TxCommit, MsgID: "x"}, nil)
	if resp.Code != protocol.SlaveNotAvailable || !strings.Contains(resp.Remark, "slave") {
		t.Fatalf("END_TRANSACTION on a slave: %d %q", resp.Code, resp.Remark)
	}
	b.tx.checkOnce() // a slave checks nothing (and must not fail)
}

// The records transactions leave in the log, byte for byte where RocketMQ
// fixes them: the half message (half topic, queue 0, sys flag without a
// transaction type, REAL_TOPIC and REAL_QID appended) and the operation
// record (operation topic, queue 0, properties exactly TAGS=d, body the
// half message's queue offset in decimal).
func TestBrokerTransactionRecordsPinned(t *testing.T) {
	b := txBroker(t, t.TempDir(), func(o *Options) { o.TransactionCheckInterval = time.Hour })
	c := newTestClient(t, b.Addr())
	for i := 0; i < 11; i++ { // two-digit queue offsets
		h := c.sendHalf("TxPin", 3, "p"+itoa(i), "UNIQ-P"+itoa(i))
		if i == 10 {
			if resp := c.endTx(h, "pg", record.TxRollback); resp.Code != protocol.Success {
				t.Fatal(resp.Remark)
			}
		}
	}
	waitDispatched(t, b, TransOpHalfTopic, 0, 1)
	half := c.pull("cg", TransHalfTopic, 0, 10, flagSubscription, 0, "*").msgs[0]
	wantProps := "TRAN_MSG\x01true\x02PGROUP\x01pg\x02UNIQ_KEY\x01UNIQ-P10\x02TAGS\x01TagT\x02CLUSTER\x01TestCluster\x02REAL_TOPIC\x01TxPin\x02REAL_QID\x013"
	if half.Topic != TransHalfTopic || half.QueueID != 0 || half.SysFlag&record.TxMask != 0 || unsealed(half.Properties) != wantProps {
		t.Fatalf("half record: topic %s queue %d sysflag %#x properties %q", half.Topic, half.QueueID, half.SysFlag, half.Properties)
	}
	op := c.pull("cg", TransOpHalfTopic, 0, 0, flagSubscription, 0, "*").msgs[0]
	if op.Topic != TransOpHalfTopic || op.QueueID != 0 || op.SysFlag != 0 || string(op.Body) != "10" ||
		unsealed(op.Properties) != "TAGS\x01d" {
		t.Fatalf("operation record: topic %s queue %d sysflag %#x body %q properties %q", op.Topic, op.QueueID, op.SysFlag, op.Body, op.Properties)
	}
}

// unsealed is a stored properties string without the seal's CRC pair.
func unsealed(p string) string { return strings.TrimRight(record.StripCRCProperty(p), "\x02") }
