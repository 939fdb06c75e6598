package client

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Transactional messages.
//
// SendMessageInTransaction sends a half message (invisible to consumers),
// runs the local transaction, and tells the broker the outcome: commit
// makes the message visible, rollback drops it. If the outcome is not
// known yet, or does not reach the broker, the broker later asks a
// producer of the same group (CHECK_TRANSACTION_STATE) and the listener's
// CheckLocalTransaction answers. This is RocketMQ's protocol: it works
// with SmartGo and Apache RocketMQ brokers.

// LocalTransactionState is the outcome of a local transaction.
type LocalTransactionState int

const (
	// TransactionUnknown: not decided yet; the broker checks back later.
	TransactionUnknown LocalTransactionState = iota
	// TransactionCommit: deliver the message.
	TransactionCommit
	// TransactionRollback: drop the message.
	TransactionRollback
)

func (s LocalTransactionState) String() string {
	switch s {
	case TransactionCommit:
		return "COMMIT_MESSAGE"
	case TransactionRollback:
		return "ROLLBACK_MESSAGE"
	}
	return "UNKNOW"
}

// commitOrRollback is the state as END_TRANSACTION carries it.
func (s LocalTransactionState) commitOrRollback() int32 {
	switch s {
	case TransactionCommit:
		return record.TxCommit
	case TransactionRollback:
		return record.TxRollback
	}
	return record.TxNotType
}

// TransactionListener runs a producer's local transactions and answers
// the broker's questions about them. A panic counts as
// TransactionUnknown.
type TransactionListener interface {
	// ExecuteLocalTransaction runs the local transaction of m, whose half
	// message the broker stored. m.Properties carries the transaction id
	// (TransactionIDProperty).
	ExecuteLocalTransaction(ctx context.Context, m *Message) LocalTransactionState
	// CheckLocalTransaction tells the outcome of the transaction of m (a
	// half message the broker holds without an outcome); m.MsgID is the
	// transaction id.
	CheckLocalTransaction(ctx context.Context, m *MessageExt) LocalTransactionState
}

// TransactionIDProperty is the user property through which
// ExecuteLocalTransaction sees the transaction id (the half message's
// client id, what CheckLocalTransaction sees as MsgID).
const TransactionIDProperty = "__transactionId__"

// TransactionSendResult is the result of SendMessageInTransaction.
type TransactionSendResult struct {
	*SendResult
	// State is what the local transaction returned.
	State LocalTransactionState
	// TransactionID identifies the transaction (the message's client id).
	TransactionID string
	// EndError, when set, says the outcome did not reach the broker; the
	// broker will check back (CheckLocalTransaction).
	EndError error
}

// maxPendingChecks bounds the check-backs waiting for the listener; more
// are dropped (the broker asks again at its next check).
const maxPendingChecks = 2000

// TransactionProducer sends transactional messages. It is a Producer (all
// its methods work) that also answers the broker's check-backs.
type TransactionProducer struct {
	*Producer
	listener TransactionListener
	checks   chan checkRequest

	mu    sync.Mutex
	known map[string]bool // protected by mu; brokers told of the group by a heartbeat
}

type checkRequest struct {
	conn *remoting.Conn
	hdr  protocol.CheckTransactionStateRequestHeader
	msg  *MessageExt
}

// NewTransactionProducer returns a producer whose check-backs listener
// answers. The producer group (opts.Group) is what the broker asks: run
// at least one producer of the group while transactions may be pending.
func NewTransactionProducer(opts ProducerOptions, listener TransactionListener) (*TransactionProducer, error) {
	if listener == nil {
		return nil, fmt.Errorf("%w: nil transaction listener", ErrBadOptions)
	}
	p, err := NewProducer(opts)
	if err != nil {
		return nil, err
	}
	tp := &TransactionProducer{Producer: p, listener: listener, checks: make(chan checkRequest, maxPendingChecks), known: map[string]bool{}}
	p.core.rc.RegisterFunc(protocol.CheckTransactionState, tp.onCheck)
	p.core.goFunc(tp.checkLoop)
	return tp, nil
}

// SendMessageInTransaction sends m as a half message, runs the local
// transaction with the listener, and sends the outcome to the broker.
// An error means the half message was not stored (the local transaction
// did not run). Transactional messages cannot be delayed.
func (tp *TransactionProducer) SendMessageInTransaction(ctx context.Context, m *Message) (*TransactionSendResult, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", ErrBadMessage)
	}
	if m.DelayLevel > 0 {
		return nil, fmt.Errorf("%w: a transactional message cannot have a delay level", ErrBadMessage)
	}
	half := *m
	half.Properties = make(map[string]string, len(m.Properties)+2)
	for k, v := range m.Properties {
		half.Properties[k] = v
	}
	half.Properties[record.PropertyTransactionPrepared] = "true"
	half.Properties[record.PropertyProducerGroup] = tp.opts.Group
	pm, err := tp.prepare(&half)
	if err != nil {
		return nil, err
	}
	pm.header.SysFlag |= record.TxPrepared
	res, err := tp.sendPrepared(ctx, pm, m.Topic, nil)
	if err != nil {
		return nil, err
	}
	tp.introduce(ctx, res.Queue.BrokerName)
	out := &TransactionSendResult{SendResult: res, TransactionID: res.MsgID}
	if res.Status == SendOK {
		m.Properties = withProperty(m.Properties, TransactionIDProperty, res.MsgID)
		out.State = tp.execute(ctx, m)
	} else {
		out.State = TransactionRollback // stored, but not as durably as asked
	}
	out.EndError = tp.endTransaction(ctx, res, out.State)
	return out, nil
}

func withProperty(p map[string]string, k, v string) map[string]string {
	if p == nil {
		p = map[string]string{}
	}
	p[k] = v
	return p
}

// Register fetches the routes of topics and heartbeats to their brokers,
// so that this producer answers the check-backs of its group's pending
// transactions before it sends anything itself (a restarted application,
// a standby producer).
func (tp *TransactionProducer) Register(ctx context.Context, topics ...string) error {
	for _, t := range topics {
		tr, err := tp.core.updateRoute(ctx, t)
		if err != nil {
			return err
		}
		for _, bd := range tr.data.BrokerDatas {
			tp.mu.Lock()
			tp.known[tp.core.masterAddr(bd.BrokerName)] = true
			tp.mu.Unlock()
		}
	}
	return tp.heartbeat(ctx)
}

// introduce heartbeats at once when a broker stored a half message before
// it knew the group (the periodic heartbeat may be 30 s away), so that it
// can check back.
func (tp *TransactionProducer) introduce(ctx context.Context, brokerName string) {
	addr := tp.core.masterAddr(brokerName)
	tp.mu.Lock()
	known := tp.known[addr]
	tp.known[addr] = true
	tp.mu.Unlock()
	if !known {
		if err := tp.heartbeat(ctx); err != nil {
			tp.core.log.Debug("heartbeat after the first half message", "broker", addr, "err", err)
		}
	}
}

// execute runs the local transaction; a panic is TransactionUnknown.
func (tp *TransactionProducer) execute(ctx context.Context, m *Message) (s LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.core.log.Error("local transaction panicked", "panic", r, "stack", string(debug.Stack()))
			s = TransactionUnknown
		}
	}()
	return tp.listener.ExecuteLocalTransaction(ctx, m)
}

// endTransaction sends END_TRANSACTION to the broker that stored the half
// message.
func (tp *TransactionProducer) endTransaction(ctx context.Context, res *SendResult, s LocalTransactionState) error {
	addr := tp.core.masterAddr(res.Queue.BrokerName)
	if addr == "" {
		return fmt.Errorf("%w: no master address for %s", ErrBrokerUnavailable, res.Queue.BrokerName)
	}
	_, phy, err := record.ParseOffsetMessageID(res.OffsetMsgID)
	if err != nil {
		return fmt.Errorf("client: end transaction: offset id %q: %w", res.OffsetMsgID, err)
	}
	h := &protocol.EndTransactionRequestHeader{ProducerGroup: tp.opts.Group, TranStateTableOffset: res.QueueOffset,
		CommitLogOffset: phy, CommitOrRollback: s.commitOrRollback(), MsgID: res.MsgID, TransactionID: res.MsgID}
	cctx, cancel := context.WithTimeout(ctx, tp.opts.SendTimeout)
	defer cancel()
	if _, err := tp.core.invokeOK(cctx, "end transaction", addr, protocol.NewRequest(protocol.EndTransaction, h, nil)); err != nil {
		tp.core.log.Warn("end transaction failed; the broker will check back", "msgId", res.MsgID, "state", s.String(), "err", err)
		return err
	}
	return nil
}

// onCheck takes CHECK_TRANSACTION_STATE from a broker; the listener
// answers on the check goroutine.
func (tp *TransactionProducer) onCheck(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.CheckTransactionStateRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		tp.core.log.Warn("bad check-back header", "broker", c.RemoteAddr().String(), "err", err)
		return nil, nil
	}
	msgs, err := decodeMessages(req.Body, "")
	if err != nil || len(msgs) != 1 {
		tp.core.log.Warn("bad check-back message", "broker", c.RemoteAddr().String(), "err", err)
		return nil, nil
	}
	m := msgs[0]
	if g := m.Property(record.PropertyProducerGroup); g != tp.opts.Group {
		tp.core.log.Warn("check-back for another producer group", "group", g, "ours", tp.opts.Group)
		return nil, nil
	}
	select {
	case tp.checks <- checkRequest{conn: c, hdr: h, msg: m}:
	default:
		tp.core.log.Warn("too many check-backs waiting; dropped one (the broker asks again)", "msgId", h.MsgID)
	}
	return nil, nil
}

// checkLoop answers check-backs one at a time until the producer closes.
func (tp *TransactionProducer) checkLoop() {
	ctx := tp.core.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case cr := <-tp.checks:
			s := tp.check(ctx, cr.msg)
			msgID := cr.msg.MsgID
			if msgID == "" {
				msgID = cr.hdr.MsgID
			}
			h := &protocol.EndTransactionRequestHeader{ProducerGroup: tp.opts.Group, TranStateTableOffset: cr.hdr.TranStateTableOffset,
				CommitLogOffset: cr.hdr.CommitLogOffset, CommitOrRollback: s.commitOrRollback(), FromTransactionCheck: true,
				MsgID: msgID, TransactionID: cr.hdr.TransactionID}
			if err := cr.conn.Oneway(protocol.NewRequest(protocol.EndTransaction, h, nil)); err != nil {
				tp.core.log.Warn("answering a check-back failed", "msgId", msgID, "err", err)
			}
		}
	}
}

// check runs CheckLocalTransaction; a panic is TransactionUnknown.
func (tp *TransactionProducer) check(ctx context.Context, m *MessageExt) (s LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.core.log.Error("transaction check panicked", "panic", r, "stack", string(debug.Stack()))
			s = TransactionUnknown
		}
	}()
	return tp.listener.CheckLocalTransaction(ctx, m)
}
