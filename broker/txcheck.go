package broker

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// The check-back service and the crash repair of transactions (see
// transaction.go).

// txCheck is a CHECK_TRANSACTION_STATE to send once the state lock is
// released.
type txCheck struct {
	conn  *remoting.Conn
	req   *protocol.Command
	group string
	key   string
}

// prepareWait bounds how long prepare waits for the dispatcher to reach
// the end of the log.
const prepareWait = 10 * time.Second

// prepare reads the transaction state from the log before the broker
// accepts writes as master (start-up, promotion): a commit a crash left
// without its operation record is only recognisable while it is the last
// record of the log.
//
// The wait for the dispatcher ends at prepareWait, at once when the
// dispatcher reports that it cannot write an entry (a full disk: it would
// not get there in time), and when ctx ends (the process is stopping).
func (t *txService) prepare(ctx context.Context) {
	st := t.b.store
	end := st.MaxPhysicalOffset()
	wctx, cancel := context.WithTimeout(ctx, prepareWait)
	err := st.WaitDispatched(wctx, end)
	cancel()
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.b.log.Info("transactions: start-up wait for the dispatcher ended: the process is stopping",
			"dispatched", st.DispatchedPhysicalOffset(), "end", end)
	default:
		t.b.log.Warn("transactions: the log is not dispatched to its end; a commit a crash cut short may be checked back",
			"dispatched", st.DispatchedPhysicalOffset(), "end", end, "err", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loadLocked()
	if err := t.catchUpLocked(); err != nil {
		t.b.log.Error("transactions: reading the half and operation topics", "err", err)
		t.loaded = false
		return
	}
	t.b.log.Info("transactions loaded", "pending", len(t.pending), "halfOffset", t.halfNext, "opOffset", t.opNext)
}

// repairLocked finds a commit whose operation record a crash cut off:
// the committed message of a pending transaction as the last record of
// the log. It writes the missing record.
func (t *txService) repairLocked() {
	b := t.b
	st := b.store
	end := st.MaxPhysicalOffset()
	for key, p := range t.pending {
		topic, qid := p.realTopic, p.realQueue
		if p.delayLevel > 0 && len(b.opts.DelayLevels) > 0 {
			topic, qid = ScheduleTopic, int32(min(p.delayLevel, len(b.opts.DelayLevels))-1)
		}
		last := st.MaxOffset(topic, qid) - 1
		if last < 0 {
			continue
		}
		res, err := st.GetMessages(topic, qid, last, 1, nil)
		if err != nil {
			continue
		}
		found := false
		if len(res.Buffers) == 1 && lastInLog(res.PhysicalOffsets[0]+int64(len(res.Buffers[0])), end, st.Options().SegmentSize) {
			v, err := record.Parse(res.Buffers[0], false)
			found = err == nil && v.SysFlag&record.TxMask == record.TxCommit && txKey(v.Properties, -1) == key
		}
		res.Release()
		if !found {
			continue
		}
		op, err := b.opMessage(p.queueOffset)
		if err == nil {
			var r store.PutResult
			if r, err = b.put(context.Background(), op, false); err == nil {
				t.settleLocked(key, p.queueOffset, r.QueueOffset, txCommitted)
				b.log.Warn("transactions: wrote the operation record a crash left out after a commit", "key", key, "group", p.group)
				return // only the last record can be one
			}
		}
		b.log.Error("transactions: cannot write the operation record of a commit", "key", key, "err", err)
		return
	}
}

// lastInLog reports whether a record ending at recEnd is the last record
// of a log ending at end: nothing follows it, or only the filler of its
// segment (the next record did not fit).
func lastInLog(recEnd, end, segSize int64) bool {
	if recEnd == end {
		return true
	}
	return segSize > 0 && recEnd < end && end%segSize == 0 && (recEnd-1)/segSize == (end-1)/segSize
}

// run is the check-back loop: every TransactionCheckInterval, while the
// broker is a writable master.
func (t *txService) run(ctx context.Context) {
	tick := time.NewTicker(t.b.opts.TransactionCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.checkOnce()
		}
	}
}

// checkOnce checks back the half messages whose outcome is overdue and
// discards those checked too often.
func (t *txService) checkOnce() {
	b := t.b
	if ok, _ := b.writable(); !ok {
		return
	}
	t.mu.Lock()
	if err := t.catchUpLocked(); err != nil {
		if t.lastErr == nil || t.lastErr.Error() != err.Error() {
			b.log.Error("transactions: reading the half and operation topics", "err", err)
		}
		t.lastErr = err
		t.mu.Unlock()
		return
	}
	t.lastErr = nil
	now := b.now()
	start := now.UnixMilli()
	due := make([]*txHalf, 0, len(t.pending))
	for _, p := range t.pending {
		due = append(due, p)
	}
	slices.SortFunc(due, func(x, y *txHalf) int { return int(x.queueOffset - y.queueOffset) })
	for _, p := range due {
		if p.storeTime >= start {
			continue // copied during this scan
		}
		immunity := b.opts.TransactionTimeout
		if p.immunity > 0 {
			immunity = p.immunity
		}
		age := time.Duration(start-p.bornTime) * time.Millisecond
		if age >= 0 && age < immunity {
			// Not due. A long immunity must not hold the progress back:
			// its copy is renewed once per interval.
			if p.immunity > 0 && time.Duration(start-p.storeTime)*time.Millisecond >= b.opts.TransactionCheckInterval {
				t.renewLocked(p, false)
			}
			continue
		}
		if p.checkTimes >= b.opts.TransactionCheckMax || age > b.store.Options().FileReservedTime {
			t.discardLocked(p, age)
			continue
		}
		t.renewLocked(p, true)
	}
	t.saveProgressLocked()
	checks := t.checks
	t.checks = nil
	t.mu.Unlock()
	for _, c := range checks {
		if err := c.conn.OnewayNoWait(c.req); err != nil {
			b.plog.Warn("transactions: check back failed", "group", c.group, "key", c.key, "peer", c.conn.RemoteAddr().String(), "err", err)
		}
	}
}

// renewLocked appends a fresh copy of p's half message and, for a check,
// counts the check in it and queues CHECK_TRANSACTION_STATE about the
// copy to a producer of the group.
func (t *txService) renewLocked(p *txHalf, check bool) {
	b := t.b
	m, err := b.store.ReadMessage(p.phy)
	if err != nil {
		b.log.Error("transactions: cannot read a half message to check it back", "key", p.key, "offset", p.phy, "err", err)
		return
	}
	props, err := record.ParseProperties(m.Properties)
	if err != nil {
		b.log.Error("transactions: half message with bad properties", "key", p.key, "offset", p.phy, "err", err)
		return
	}
	if check {
		props.Set(record.PropertyTransactionCheckTimes, strconv.Itoa(p.checkTimes+1))
	}
	if _, ok := props.Get(record.PropertyUniqueClientMessageIDKeyIndex); !ok {
		if _, ok := props.Get(record.PropertyTranPreparedQueueOffset); !ok {
			props.Set(record.PropertyTranPreparedQueueOffset, strconv.FormatInt(p.queueOffset, 10)) // keeps the key
		}
	}
	c := &record.Message{Topic: TransHalfTopic, QueueID: 0, Flag: m.Flag, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp,
		BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes, Body: m.Body, Properties: props.String()}
	res, err := b.put(context.Background(), c, false)
	if err != nil {
		b.log.Error("transactions: cannot copy a half message to check it back", "key", p.key, "err", err)
		return
	}
	n := *p
	n.queueOffset, n.phy, n.storeTime = res.QueueOffset, res.PhysicalOffset, res.StoreTimestamp
	if check {
		n.checkTimes++
	}
	t.pending[p.key] = &n
	if check {
		c.QueueOffset, c.PhysicalOffset = res.QueueOffset, res.PhysicalOffset
		t.queueCheckLocked(&n, c)
	}
}

// queueCheckLocked prepares CHECK_TRANSACTION_STATE about the copy c of
// p's half message for a producer of p's group connected here.
func (t *txService) queueCheckLocked(p *txHalf, c *record.Message) {
	b := t.b
	var conns []*remoting.Conn
	for _, ci := range b.producers.Clients(p.group) {
		if conn, ok := ci.Channel.(*remoting.Conn); ok {
			conns = append(conns, conn)
		}
	}
	if len(conns) == 0 {
		b.plog.Warn("transactions: no producer of the group is connected to check back", "group", p.group, "key", p.key,
			"checks", p.checkTimes, "max", b.opts.TransactionCheckMax)
		return
	}
	conn := conns[t.pick%uint32(len(conns))]
	t.pick++
	uniq, _ := record.LookupPropertyString(c.Properties, record.PropertyUniqueClientMessageIDKeyIndex)
	h := &protocol.CheckTransactionStateRequestHeader{TranStateTableOffset: c.QueueOffset, CommitLogOffset: c.PhysicalOffset,
		MsgID: uniq, TransactionID: uniq, OffsetMsgID: record.OffsetMessageID(b.storeHost, c.PhysicalOffset)}
	// The producer sees the message as it will be: in its real topic.
	body := *c
	body.Topic, body.QueueID, body.StoreHost = p.realTopic, p.realQueue, b.storeHost
	body.StoreTimestamp = p.storeTime
	enc, err := record.AppendRecord(nil, &body)
	if err != nil {
		b.log.Error("transactions: cannot encode a check-back", "key", p.key, "err", err)
		return
	}
	req := protocol.NewRequest(protocol.CheckTransactionState, h, enc)
	req.SerializeType = protocol.SerializeJSON
	t.checks = append(t.checks, txCheck{conn: conn, req: req, group: p.group, key: p.key})
}

// discardLocked gives up on p's transaction: its half message goes to
// TRANS_CHECK_MAX_TIME_TOPIC, an operation record settles it, and a
// warning says so.
func (t *txService) discardLocked(p *txHalf, age time.Duration) {
	b := t.b
	m, err := b.store.ReadMessage(p.phy)
	if err == nil {
		_, err = b.topics.CreateSystemTopic(TransCheckMax, 1, PermRW)
	}
	var op *record.Message
	if err == nil {
		op, err = b.opMessage(p.queueOffset)
	}
	if err == nil {
		d := &record.Message{Topic: TransCheckMax, QueueID: 0, Flag: m.Flag, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp,
			BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes, Body: m.Body, Properties: m.Properties}
		var res [2]store.PutResult
		if res, err = b.store.PutPair(d, op); err == nil {
			t.settleLocked(p.key, p.queueOffset, res[1].QueueOffset, txDiscarded)
			b.log.Warn("transactions: half message discarded to "+TransCheckMax, "key", p.key, "group", p.group,
				"topic", p.realTopic, "checks", p.checkTimes, "age", age.Round(time.Second))
			return
		}
	}
	b.log.Error("transactions: cannot discard a half message", "key", p.key, "err", err)
}

// becameMaster reads the state before writes are accepted (controller
// mode), and configures the real topics of the open transactions this
// master has no configuration for: a topic created on the old master
// shortly before the failover, whose only records are half messages.
// Without it the topic has no route, the producer never heartbeats this
// master (the Go client heartbeats the brokers of its routes), and the
// check-backs that would settle those transactions find no producer.
func (t *txService) becameMaster(ctx context.Context) error {
	t.prepare(ctx)
	t.mu.Lock()
	queues := map[string]int32{}
	for _, p := range t.pending {
		if p.realTopic != "" {
			queues[p.realTopic] = max(queues[p.realTopic], p.realQueue)
		}
	}
	t.mu.Unlock()
	for topic, q := range queues {
		if ids := t.b.store.QueueIDs(topic); len(ids) > 0 {
			q = max(q, slices.Max(ids))
		}
		t.b.republishTopic(topic, q)
	}
	return nil
}

// becameSlave: the check loop pauses by itself (writable is false).
func (t *txService) becameSlave() {}

// truncated forgets the state: the log it was read from was cut.
func (t *txService) truncated(int64) error {
	t.reset()
	return nil
}
