package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// Transactional messages (RocketMQ 4.x).
//
// A producer sends a half message: a message with the property
// TRAN_MSG=true (and sys flag TRANSACTION_PREPARED). The broker stores it
// in queue 0 of RMQ_SYS_TRANS_HALF_TOPIC with its real topic and queue in
// the properties REAL_TOPIC and REAL_QID, so no consumer sees it. The
// producer runs its local transaction and sends END_TRANSACTION (37)
// naming the half message (its commitlog offset and queue offset) and the
// outcome: COMMIT puts the message to its real topic (sys flag
// TRANSACTION_COMMIT, the half's commitlog offset as its prepared
// transaction offset, the half's properties and so its UNIQ_KEY message id
// kept), ROLLBACK does nothing more. Either way the broker writes an
// operation record to queue 0 of RMQ_SYS_TRANS_OP_HALF_TOPIC: tag "d",
// body the half message's queue offset in decimal (RocketMQ's format).
//
// A committed message and its operation record are appended back to back
// (store.PutPair), so after a crash either both are in the log or the
// committed message is the last record of the log; the service finds it
// there when it loads and writes the missing operation record. The
// outcome of every transaction is in the log: a restart, or a slave taking
// over, rebuilds the state from the two topics and never commits or rolls
// back a transaction twice.
//
// A half message whose outcome is unknown once it is older than
// Options.TransactionTimeout (its born time; the property
// CHECK_IMMUNITY_TIME_IN_SECONDS sets its own) is checked back every
// Options.TransactionCheckInterval: the broker appends a fresh copy of it
// to the half topic with TRANSACTION_CHECK_TIMES counted up and sends
// CHECK_TRANSACTION_STATE (39) about that copy to a producer of its group
// connected to this broker, which answers with END_TRANSACTION. After
// Options.TransactionCheckMax checks the half message is discarded: copied
// to TRANS_CHECK_MAX_TIME_TOPIC, closed with an operation record, and
// logged.
//
// Transactions are told apart by their UNIQ_KEY (the producer's message
// id), which every copy keeps: END_TRANSACTION for any copy of a
// transaction already committed, rolled back or discarded is refused
// with TRANSACTION_FAILED, and one naming no half message with
// SYSTEM_ERROR; both are logged.
//
// Progress is kept as the consumer offsets of group CID_RMQ_SYS_TRANS on
// the two topics (as RocketMQ does), so a slave copies it with the other
// offsets: the first half message not yet settled and the first operation
// record still needed to know the outcome of a half message after it.

// Names of the transaction machinery (RocketMQ's).
const (
	// TransactionGroup is the consumer group whose offsets on the half and
	// operation topics are the check's progress.
	TransactionGroup = "CID_RMQ_SYS_TRANS"
	// opRemoveTag tags an operation record: the half message is settled.
	opRemoveTag = "d"
)

// txOutcome is how a transaction ended.
type txOutcome uint8

const (
	txSettled   txOutcome = iota // an operation record says so (outcome not recorded)
	txCommitted                  // committed here
	txRolledBack
	txDiscarded
)

func (o txOutcome) String() string {
	return [...]string{"settled (committed, rolled back or discarded)", "committed", "rolled back", "discarded"}[o]
}

// txHalf is the newest copy of a transaction's half message whose outcome
// is not known yet.
type txHalf struct {
	key         string
	queueOffset int64 // in the half topic
	phy         int64
	storeTime   int64 // ms
	bornTime    int64 // ms
	checkTimes  int
	immunity    time.Duration // 0: the transaction timeout
	group       string
	realTopic   string
	realQueue   int32
	delayLevel  int // its DELAY level: committed, it goes to the schedule topic
}

// txDone is a settled transaction, kept while a copy of its half message
// may still be read at or after the progress.
type txDone struct {
	outcome txOutcome
	maxCopy int64 // highest queue offset of a copy of its half message
	op      int64 // queue offset of its operation record
}

// txService holds the state of the transactions of this broker: what the
// half and operation topics say, read up to halfNext and opNext.
type txService struct {
	b *Broker

	mu       sync.Mutex
	loaded   bool                // protected by mu; the state was read from the progress on
	repaired bool                // protected by mu; the crash repair ran since loading
	halfNext int64               // protected by mu; next half-topic offset to read
	opNext   int64               // protected by mu; next operation-topic offset to read
	pending  map[string]*txHalf  // protected by mu; by key
	settled  map[string]*txDone  // protected by mu; by key
	pick     uint32              // protected by mu; round robin over a group's producers
	checks   []txCheck           // protected by mu; checks to send once mu is released
	lastErr  error               // protected by mu; last failure to read the log
	warned   map[string]struct{} // protected by mu; groups warned about having no producer
}

func newTxService(b *Broker) *txService {
	return &txService{b: b, pending: map[string]*txHalf{}, settled: map[string]*txDone{}, warned: map[string]struct{}{}}
}

// divertHalf parks a half message in queue 0 of the half topic with its
// real topic and queue in properties.
func (b *Broker) divertHalf(m *record.Message) error {
	if _, err := b.topics.CreateSystemTopic(TransHalfTopic, 1, PermRW); err != nil {
		return fmt.Errorf("create %s: %w", TransHalfTopic, err)
	}
	m.Properties = appendProperty(m.Properties, record.PropertyRealTopic, m.Topic)
	m.Properties = appendProperty(m.Properties, record.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.Topic, m.QueueID = TransHalfTopic, 0
	m.SysFlag &^= record.TxMask // dispatched to the half topic's queue
	return nil
}

// txKey names the transaction of a half message copy: its UNIQ_KEY, or
// without one the queue offset of its first copy.
func txKey(props []byte, queueOffset int64) string {
	if v, ok := record.LookupProperty(props, record.PropertyUniqueClientMessageIDKeyIndex); ok {
		return string(v)
	}
	if v, ok := record.LookupProperty(props, record.PropertyTranPreparedQueueOffset); ok {
		return "@" + string(v)
	}
	return "@" + strconv.FormatInt(queueOffset, 10)
}

// halfFromView reads the transaction facts of a half message copy.
func halfFromView(v *record.View) *txHalf {
	h := &txHalf{key: txKey(v.Properties, v.QueueOffset), queueOffset: v.QueueOffset, phy: v.PhysicalOffset,
		storeTime: v.StoreTimestamp, bornTime: v.BornTimestamp}
	get := func(k string) (string, bool) {
		s, ok := record.LookupProperty(v.Properties, k)
		return string(s), ok
	}
	if s, ok := get(record.PropertyTransactionCheckTimes); ok {
		h.checkTimes, _ = strconv.Atoi(s)
	}
	if s, ok := get(record.PropertyCheckImmunityTimeInSeconds); ok {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			h.immunity = time.Duration(n) * time.Second
		}
	}
	h.group, _ = get(record.PropertyProducerGroup)
	h.realTopic, _ = get(record.PropertyRealTopic)
	if s, ok := get(record.PropertyRealQueueID); ok {
		q, _ := strconv.Atoi(s)
		h.realQueue = int32(q)
	}
	if s, ok := get(record.PropertyDelayLevel); ok {
		h.delayLevel, _ = strconv.Atoi(s)
	}
	return h
}

// reset forgets the state; the next use reads it from the progress on.
func (t *txService) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loaded, t.repaired = false, false
}

// loadLocked starts reading the two topics at the saved progress.
func (t *txService) loadLocked() {
	st := t.b.store
	start := func(topic string) int64 {
		off, ok := t.b.offsets.Query(TransactionGroup, topic, 0)
		lo, hi := st.MinOffset(topic, 0), st.MaxOffset(topic, 0)
		if !ok || off < lo {
			off = lo
		}
		return min(off, hi)
	}
	t.halfNext, t.opNext = start(TransHalfTopic), start(TransOpHalfTopic)
	clear(t.pending)
	clear(t.settled)
	t.loaded, t.repaired = true, false
}

// catchUpLocked reads the half and operation records written since the
// last call (from the progress, after a load; see prepare).
func (t *txService) catchUpLocked() error {
	if !t.loaded {
		t.loadLocked()
	}
	if !t.repaired {
		if err := t.readHalvesLocked(t.b.store.MaxOffset(TransHalfTopic, 0)); err != nil {
			return err
		}
		if err := t.readOpsLocked(); err != nil {
			return err
		}
		t.repairLocked()
		t.repaired = true
	}
	if err := t.readHalvesLocked(t.b.store.MaxOffset(TransHalfTopic, 0)); err != nil {
		return err
	}
	return t.readOpsLocked()
}

// scanQueue reads queue 0 of topic from off to end in batches, calling fn
// for each record; it returns the offset after the last one read.
func (t *txService) scanQueue(topic string, off, end int64, fn func(buf []byte, queueOffset int64)) (int64, error) {
	st := t.b.store
	for off < end {
		res, err := st.GetMessages(topic, 0, off, 32, nil)
		if err != nil {
			return off, fmt.Errorf("read %s at %d: %w", topic, off, err)
		}
		for i, buf := range res.Buffers {
			if res.QueueOffsets[i] >= end {
				break
			}
			fn(buf, res.QueueOffsets[i])
		}
		next := res.NextBeginOffset
		res.Release()
		if next <= off {
			break // nothing more readable now
		}
		off = min(next, end)
	}
	return off, nil
}

// readHalvesLocked reads half message copies up to end.
func (t *txService) readHalvesLocked(end int64) error {
	next, err := t.scanQueue(TransHalfTopic, t.halfNext, end, func(buf []byte, q int64) {
		v, err := record.Parse(buf, false)
		if err != nil {
			t.b.log.Error("transactions: unreadable half message skipped", "offset", q, "err", err)
			return
		}
		t.addCopyLocked(halfFromView(&v))
	})
	t.halfNext = max(t.halfNext, next)
	return err
}

// addCopyLocked records a copy of a half message: the newest copy of a
// pending transaction, or one more copy of a settled one.
func (t *txService) addCopyLocked(h *txHalf) *txHalf {
	if d := t.settled[h.key]; d != nil {
		d.maxCopy = max(d.maxCopy, h.queueOffset)
		return nil
	}
	if p := t.pending[h.key]; p != nil && p.queueOffset >= h.queueOffset {
		return p
	}
	t.pending[h.key] = h
	return h
}

// readOpsLocked reads operation records up to the end of their queue.
func (t *txService) readOpsLocked() error {
	st := t.b.store
	next, err := t.scanQueue(TransOpHalfTopic, t.opNext, st.MaxOffset(TransOpHalfTopic, 0), func(buf []byte, op int64) {
		v, err := record.Parse(buf, false)
		if err != nil {
			t.b.log.Error("transactions: unreadable operation record skipped", "offset", op, "err", err)
			return
		}
		if tag, _ := record.LookupProperty(v.Properties, record.PropertyTags); string(tag) != opRemoveTag {
			return
		}
		q, err := strconv.ParseInt(string(v.Body), 10, 64)
		if err != nil {
			t.b.log.Error("transactions: operation record with a bad body skipped", "offset", op, "body", string(v.Body))
			return
		}
		if q >= t.halfNext { // the half message is dispatched before its operation record
			if err := t.readHalvesLocked(q + 1); err != nil {
				t.lastErr = err
			}
		}
		key, ok := t.keyAt(q)
		if !ok {
			return // its half message is gone (retention): nothing to settle
		}
		t.settleLocked(key, q, op, txSettled)
	})
	t.opNext = max(t.opNext, next)
	return err
}

// keyAt returns the transaction key of the half message copy at queue
// offset q.
func (t *txService) keyAt(q int64) (string, bool) {
	res, err := t.b.store.GetMessages(TransHalfTopic, 0, q, 1, nil)
	if err != nil {
		return "", false
	}
	defer res.Release()
	if len(res.Buffers) == 0 || res.QueueOffsets[0] != q {
		return "", false
	}
	v, err := record.Parse(res.Buffers[0], false)
	if err != nil {
		return "", false
	}
	return txKey(v.Properties, q), true
}

// settleLocked records that the transaction key is settled by the
// operation record op (about its copy at q).
func (t *txService) settleLocked(key string, q, op int64, o txOutcome) {
	d := t.settled[key]
	if d == nil {
		d = &txDone{outcome: o, maxCopy: q, op: op}
		t.settled[key] = d
	} else {
		d.maxCopy, d.op = max(d.maxCopy, q), min(d.op, op)
		if o != txSettled {
			d.outcome = o
		}
	}
	if p := t.pending[key]; p != nil {
		d.maxCopy = max(d.maxCopy, p.queueOffset)
		delete(t.pending, key)
	}
}

// saveProgressLocked commits the progress: the first half-topic offset a
// restart must read (the oldest pending copy) and the first operation
// record it needs (the oldest about a transaction with a copy from there
// on). Settled transactions all of whose copies are behind are dropped.
func (t *txService) saveProgressLocked() {
	h := t.halfNext
	for _, p := range t.pending {
		h = min(h, p.queueOffset)
	}
	o := t.opNext
	for k, d := range t.settled {
		if d.maxCopy < h {
			delete(t.settled, k)
			continue
		}
		o = min(o, d.op)
	}
	t.b.offsets.Commit(TransactionGroup, TransHalfTopic, 0, h)
	t.b.offsets.Commit(TransactionGroup, TransOpHalfTopic, 0, o)
}

// opMessage is the operation record settling the half message copy at
// queue offset q.
func (b *Broker) opMessage(q int64) (*record.Message, error) {
	if _, err := b.topics.CreateSystemTopic(TransOpHalfTopic, 1, PermRW); err != nil {
		return nil, fmt.Errorf("create %s: %w", TransOpHalfTopic, err)
	}
	return &record.Message{Topic: TransOpHalfTopic, QueueID: 0, BornTimestamp: b.now().UnixMilli(), BornHost: b.storeHost,
		Body: []byte(strconv.FormatInt(q, 10)), Properties: props1(record.PropertyTags, opRemoveTag)}, nil
}

func props1(k, v string) string { return k + string(record.NameValueSeparator) + v }

// committedMessage is the message a commit puts to the real topic, from
// the half message copy the producer named.
func (b *Broker) committedMessage(half *record.Message) (*record.Message, error) {
	p, err := record.ParseProperties(half.Properties)
	if err != nil {
		return nil, err
	}
	topic, _ := p.Get(record.PropertyRealTopic)
	qs, _ := p.Get(record.PropertyRealQueueID)
	q, err := strconv.Atoi(qs)
	if topic == "" || err != nil {
		return nil, fmt.Errorf("half message at %d has no real topic and queue (REAL_TOPIC %q, REAL_QID %q)", half.PhysicalOffset, topic, qs)
	}
	p.Del(record.PropertyTransactionPrepared)
	p.Del(record.PropertyRealTopic)
	p.Del(record.PropertyRealQueueID)
	m := &record.Message{Topic: topic, QueueID: int32(q), Flag: half.Flag, SysFlag: half.SysFlag&^record.TxMask | record.TxCommit,
		BornTimestamp: half.BornTimestamp, BornHost: half.BornHost, ReconsumeTimes: half.ReconsumeTimes,
		PreparedTransactionOffset: half.PhysicalOffset, Body: half.Body, Properties: p.String()}
	if err := b.divertDelayed(m); err != nil {
		return nil, err
	}
	return m, nil
}

// errTxResolved and errTxUnknown classify END_TRANSACTION refusals.
var (
	errTxResolved = errors.New("broker: the transaction is already settled")
	errTxUnknown  = errors.New("broker: no such prepared transaction message")
)

// end settles the transaction of the half message copy h names.
func (t *txService) end(h *protocol.EndTransactionRequestHeader) (txOutcome, error) {
	b := t.b
	half, err := b.store.ReadMessage(h.CommitLogOffset)
	if err != nil || half.Topic != TransHalfTopic {
		if err == nil {
			err = fmt.Errorf("the message there is in topic %s", half.Topic)
		}
		return 0, fmt.Errorf("%w at commitLogOffset %d: %v", errTxUnknown, h.CommitLogOffset, err)
	}
	if g, _ := record.LookupPropertyString(half.Properties, record.PropertyProducerGroup); g != h.ProducerGroup {
		return 0, fmt.Errorf("%w: the half message at %d belongs to producer group %q, not %q", errTxUnknown, h.CommitLogOffset, g, h.ProducerGroup)
	}
	if half.QueueOffset != h.TranStateTableOffset {
		return 0, fmt.Errorf("%w: tranStateTableOffset %d does not match the half message at %d (queue offset %d)",
			errTxUnknown, h.TranStateTableOffset, h.CommitLogOffset, half.QueueOffset)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.catchUpLocked(); err != nil {
		return 0, err
	}
	key := txKey([]byte(half.Properties), half.QueueOffset)
	p := t.pending[key]
	if p == nil && half.QueueOffset >= t.halfNext { // not dispatched yet
		v := record.View{QueueOffset: half.QueueOffset, PhysicalOffset: half.PhysicalOffset, StoreTimestamp: half.StoreTimestamp,
			BornTimestamp: half.BornTimestamp, Properties: []byte(half.Properties)}
		p = t.addCopyLocked(halfFromView(&v))
	}
	if p == nil {
		o := txSettled
		if d := t.settled[key]; d != nil {
			o = d.outcome
		}
		return o, fmt.Errorf("%w: transaction %s (half message at commitLogOffset %d) was already %s", errTxResolved, key, h.CommitLogOffset, o)
	}
	op, err := b.opMessage(half.QueueOffset)
	if err != nil {
		return 0, err
	}
	outcome := txRolledBack
	var opRes store.PutResult
	if h.CommitOrRollback == record.TxCommit {
		outcome = txCommitted
		m, err := b.committedMessage(half)
		if err != nil {
			return 0, err
		}
		b.republishTopic(m.Topic, m.QueueID)
		res, err := b.store.PutPair(m, op)
		if err != nil {
			if res[0].Status == store.PutOK {
				// The message is in; only its operation record is not: keep
				// it settled here (a restart finds the message last in the log).
				t.settleLocked(key, half.QueueOffset, t.opNext, txCommitted)
				b.log.Error("transactions: committed message stored, its operation record not", "key", key, "err", err)
			}
			return 0, err
		}
		b.stats.AddPut(m.Topic, 1, int64(len(m.Body)))
		opRes = res[1]
	} else if opRes, err = b.put(context.Background(), op, false); err != nil {
		return 0, err
	}
	t.settleLocked(key, half.QueueOffset, opRes.QueueOffset, outcome)
	return outcome, nil
}

// processEndTransaction serves END_TRANSACTION (37).
func (b *Broker) processEndTransaction(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.EndTransactionRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad end-transaction header: %v", err), nil
	}
	if ok, why := b.writable(); !ok {
		code := int32(protocol.ServiceNotAvailable)
		if b.isSlave() {
			code = protocol.SlaveNotAvailable
		}
		return errResp(code, "the broker[%s] %s; end transaction is forbidden", b.addr, why), nil
	}
	switch h.CommitOrRollback {
	case record.TxCommit, record.TxRollback:
	case record.TxNotType:
		// The producer does not know yet: the check-back will ask again.
		b.log.Debug("transaction outcome unknown to the producer", "group", h.ProducerGroup, "msgId", h.MsgID,
			"fromCheck", h.FromTransactionCheck, "peer", c.RemoteAddr().String())
		return protocol.NewResponse(protocol.Success, "outcome unknown; the broker will check back"), nil
	default:
		return errResp(protocol.SystemError, "commitOrRollback %d is none of 0 (unknown), 8 (commit), 12 (rollback)", h.CommitOrRollback), nil
	}
	outcome, err := b.tx.end(&h)
	switch {
	case err == nil:
		b.plog.Debug("transaction settled", "outcome", outcome.String(), "group", h.ProducerGroup, "msgId", h.MsgID, "fromCheck", h.FromTransactionCheck)
		return protocol.NewResponse(protocol.Success, ""), nil
	case errors.Is(err, errTxResolved):
		b.plog.Warn("end transaction refused: already settled", "group", h.ProducerGroup, "msgId", h.MsgID,
			"commitLogOffset", h.CommitLogOffset, "peer", c.RemoteAddr().String(), "reason", err.Error())
		return errResp(protocol.TransactionFailed, "%v", err), nil
	case errors.Is(err, errTxUnknown):
		b.plog.Warn("end transaction refused: no such half message", "group", h.ProducerGroup, "msgId", h.MsgID,
			"commitLogOffset", h.CommitLogOffset, "peer", c.RemoteAddr().String(), "reason", err.Error())
		return errResp(protocol.SystemError, "%v", err), nil
	}
	b.log.Error("end transaction failed", "group", h.ProducerGroup, "msgId", h.MsgID, "err", err)
	return errResp(protocol.SystemError, "end transaction: %v", err), nil
}
