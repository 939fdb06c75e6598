package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// versionHonoursMaxReconsume is V3_4_9: from this client version on the
// broker takes maxReconsumeTimes from the request header.
const versionHonoursMaxReconsume = 121

// putTimeout bounds a put's wait for the group commit beyond the store's own
// sync flush timeout (blocking puts: send-back, the state store).
const putTimeout = 30 * time.Second

func errResp(code int32, format string, args ...any) *protocol.Command {
	return protocol.NewResponse(code, fmt.Sprintf(format, args...))
}

// processSend serves SEND_MESSAGE (10, long header names),
// SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320, short names).
//
// It never waits. The store appends the message and, when the send waits
// for durability (sync flush) or for a slave (sync master), the answer is
// written later by whoever completes that wait: the store's flusher calls
// back once the group commit covers the message, then the HA server's ack
// loop once a slave has it (see answerSend). Meanwhile the processor has
// returned nil and the connection's reader goes on with the next request.
func (b *Broker) processSend(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	// A timed send starts at its reader's batch clock (sends are inline
	// processors), which its put reads anyway: its latency counts from
	// when its batch was first served, the wait behind the batch's earlier
	// requests included, and no clock is read for it.
	var start time.Time
	if b.metrics.sendTimed() {
		start = c.BatchTime()
	}
	resp := b.send(c, req, start)
	if resp != nil {
		b.metrics.sendDone(start)
	}
	return resp, nil
}

// send is processSend; a nil response means it is answered later.
func (b *Broker) send(c *remoting.Conn, req *protocol.Command, start time.Time) *protocol.Command {
	resp, err := b.sendOrAnswerLater(c, req, start)
	if err != nil {
		return protocol.NewResponse(protocol.SystemError, err.Error())
	}
	return resp
}

func (b *Broker) sendOrAnswerLater(c *remoting.Conn, req *protocol.Command, start time.Time) (*protocol.Command, error) {
	// One allocation holds what the send needs until it is answered: its
	// header, message, response and response header (sendasync.go).
	a := b.newPendingSend(c, req, start)
	h := &a.h
	esc, err := protocol.DecodeSendHeaderEscaped(req, h)
	if err != nil {
		return errResp(protocol.SystemError, "bad send header: %v", err), nil
	}
	batch := req.Code == protocol.SendBatchMessage || h.Batch
	tc, resp := b.sendTarget(h)
	if resp != nil {
		return resp, nil
	}
	// The header's strings alias the request's receive buffer and are
	// valid until the request is recycled, right after this processor
	// returns (protocol.Command.Recycle): what outlives it is owned. The
	// message names its topic by the configuration's string, which the
	// store, the statistics and the answer's callback may keep.
	// Set in place: a literal is built on the stack and copied in with
	// 16-byte loads over its 8-byte stores, which the CPU does not
	// forward (a wait for the store buffer to drain).
	m := &a.msg
	*m = record.Message{}
	m.Topic, m.QueueID, m.Flag, m.SysFlag = tc.TopicName, h.QueueID, h.Flag, h.SysFlag
	m.BornTimestamp, m.BornHost = h.BornTimestamp, peerAddr(c)
	m.ReconsumeTimes, m.Properties = h.ReconsumeTimes, h.Properties
	if m.QueueID < 0 {
		if tc.WriteQueueNums <= 0 {
			return noWriteQueue(tc), nil
		}
		m.QueueID = int32(b.queueRR.Add(1) % uint32(tc.WriteQueueNums))
	}
	if m.QueueID >= max(tc.WriteQueueNums, tc.ReadQueueNums) {
		return errResp(protocol.SystemError, "request queueId[%d] is illegal, topic %s has %d write and %d read queues",
			m.QueueID, h.Topic, tc.WriteQueueNums, tc.ReadQueueNums), nil
	}
	if tc.TopicFilterType == protocol.TopicFilterMultiTag {
		m.SysFlag |= record.FlagMultiTags
	}
	// One pass over the properties: the stored form (into a's buffer
	// while it fits) and what the send needs from them, from the JSON
	// header's text when they came with no escapes but the separators'.
	var props []byte
	var sp sendProps
	if esc != "" {
		props = appendStoredPropertiesEscapedTo(a.props[:0], &sp, esc, b.opts.ClusterName, h.ProducerGroup)
	} else {
		props = appendStoredPropertiesTo(a.props[:0], &sp, h.Properties, b.opts.ClusterName, h.ProducerGroup)
	}
	if sp.half {
		if batch {
			return errResp(protocol.MessageIllegal, "a batch cannot be a transaction's half message"), nil
		}
		// A transaction's half message: divertDelayed parks it in the
		// half topic; props name its producer group.
		m.SysFlag = m.SysFlag&^record.TxMask | record.TxPrepared
	}
	if IsRetryTopic(h.Topic) && !batch {
		if resp := b.redirectRetry(m, h, req.Version); resp != nil {
			return resp, nil
		}
	}
	if sp.replyTo != "" {
		b.registerRequester(c, req, h.ProducerGroup, sp.replyTo)
	}
	m.Properties = unsafe.String(unsafe.SliceData(props), len(props)) // props is not written again
	m.Known.Set(m.Properties, sp.known)                               // set in place
	a.wait, a.delay, a.hasDelay = sp.wait, sp.delay, sp.hasDelay
	if !b.acceptAsync() {
		return errResp(protocol.SystemBusy, "%s", protocol.RemarkSystemBusy), nil
	}
	if batch {
		resp := b.putBatch(a, m, req.Body)
		return a.unlessPending(resp), nil
	}
	a.queueID = m.QueueID // the response names the requested queue, even when delayed
	if h.Resend {
		// A resend may have to wait for the index (resend.go): it is
		// served off the reader. The body and the header's strings it
		// reads are copied: the request's receive buffer is reused once
		// this processor returned.
		m.Body = bytes.Clone(req.Body)
		a.delay = strings.Clone(a.delay) // a slice of the header
		b.goFunc(func() {
			resp := b.resendOrStore(a, m)
			b.store.Drain() // not on the reader: no batch end drains for it
			if resp != nil {
				a.answer(resp)
			}
		})
		return nil, nil
	}
	m.Body = req.Body
	// The put is timed by the reader's batch clock (sends are inline
	// processors): one clock reading for the batch's puts.
	return a.unlessPending(b.storeSend(a, m, c.BatchTime())), nil
}

// storeSend stores the message of a single send: the response, or nil
// when the store (or the HA server) answers later. began is when the put
// began (store.Store.PutAsyncDeferredAt), zero to read the clock.
func (b *Broker) storeSend(a *pendingSend, m *record.Message, began time.Time) *protocol.Command {
	if err := b.divertDelayedBy(m, a.delay, a.hasDelay); err != nil {
		return errResp(protocol.MessageIllegal, "%v", err)
	}
	// Deferred: the reader's batch end drains (processors.go), where
	// the answer joins the batch's other answers in one write. The put's
	// time is the store's (PutResult.Latency), from began.
	res, pending, err := b.store.PutAsyncDeferredAt(m, a.wait, a, began)
	if pending {
		// The store calls a.PutDone, which times and counts the put
		// before answering: the answer may leave before this goroutine
		// runs on.
		return nil
	}
	b.rt.observePut(res.Latency)
	if err != nil {
		return b.putErrorResponse(res.Status, err)
	}
	b.stats.AddPut(m.Topic, 1, int64(len(m.Body)))
	return a.storedResponse(res)
}

// resendOrStore serves a send marked as a resend: the message an earlier
// attempt stored, if the log has it, else the message stored now.
func (b *Broker) resendOrStore(a *pendingSend, m *record.Message) *protocol.Command {
	if hdr, end := b.findResent(m); hdr != nil {
		return a.replicated(protocol.Success, end, hdr)
	}
	return b.storeSend(a, m, time.Time{}) // off the reader: no batch clock
}

// putBatch stores the items of a SEND_BATCH body for a. tmpl.Properties
// are the batch-level properties, already without WAIT (a.wait is its
// value); WAIT pairs in the items' own properties are cut out of the
// request body in place. A nil response means the store calls back.
func (b *Broker) putBatch(a *pendingSend, tmpl *record.Message, body []byte) *protocol.Command {
	a.queueID = tmpl.QueueID
	if IsRetryTopic(tmpl.Topic) {
		return errResp(protocol.MessageIllegal, "batch messages cannot be sent to retry topic %s", tmpl.Topic)
	}
	if _, ok := record.LookupPropertyString(tmpl.Properties, record.PropertyDelayLevel); ok {
		return errResp(protocol.MessageIllegal, "batch messages cannot have a delay level")
	}
	if len(body) > b.maxBatchBody {
		// RocketMQ's store refuses a batch whose encoded body (all its
		// items) exceeds maxMessageSize, each item may be small: its
		// broker answers MESSAGE_ILLEGAL with the remark below.
		return errResp(protocol.MessageIllegal, "%s (batch body of %d bytes)", illegalMessageRemark(b.maxBatchBody), len(body))
	}
	bp := batchItemsPool.Get().(*[]record.BatchItem)
	defer func() {
		clear(*bp) // the items point into the request body
		if cap(*bp) <= maxPooledBatchItems {
			*bp = (*bp)[:0]
			batchItemsPool.Put(bp)
		}
	}()
	items := (*bp)[:0]
	delayed := -1 // the first item with a delay level
	if err := record.ForEachBatchItem(body, func(it record.BatchItem) error {
		it.Properties = stripWaitInPlace(it.Properties)
		if delayed < 0 && hasDelayLevel(it.Properties) {
			delayed = len(items)
		}
		items = append(items, it)
		return nil
	}); err != nil {
		*bp = items
		return errResp(protocol.MessageIllegal, "bad batch body: %v", err)
	}
	*bp = items
	if delayed >= 0 {
		// RocketMQ's broker would store such an item at once, delay
		// ignored (its Java client refuses to build the batch;
		// rocketmq-client-go sends it): refuse it rather than deliver a
		// delayed message early.
		return errResp(protocol.MessageIllegal, "batch messages cannot have a delay level (message %d of the batch has %s)", delayed, record.PropertyDelayLevel)
	}
	if len(items) == 0 {
		return errResp(protocol.MessageIllegal, "empty batch")
	}
	res, pending, err := b.store.PutBatchAsync(tmpl, items, a.wait, a.storedBatch)
	if !pending {
		b.rt.observePut(res.Latency) // else storedBatch does
	}
	if err != nil {
		return b.putErrorResponse(res.Status, err)
	}
	var bodyBytes int64
	for _, it := range items {
		bodyBytes += int64(len(it.Body))
	}
	b.stats.AddPut(tmpl.Topic, int64(len(items)), bodyBytes)
	if pending {
		return nil
	}
	return a.storedBatchResponse(res)
}

// put stores m, timing it for the runtime statistics.
func (b *Broker) put(ctx context.Context, m *record.Message, wait bool) (store.PutResult, error) {
	res, err := b.store.PutWait(ctx, m, wait)
	b.rt.observePut(res.Latency)
	return res, err
}

// batchItemsPool recycles the item lists of SEND_BATCH requests.
var batchItemsPool = sync.Pool{New: func() any { return new([]record.BatchItem) }}

// maxPooledBatchItems bounds the item lists kept in batchItemsPool.
const maxPooledBatchItems = 4096

// checkSendable applies the broker-level checks of a send: role, broker
// permission, topic name and reserved topics.
func (b *Broker) checkSendable(topic string) *protocol.Command {
	if resp := b.checkWritable(); resp != nil {
		return resp
	}
	if err := ValidateTopicName(topic); err != nil {
		return errResp(protocol.SystemError, "%v", err)
	}
	if notAllowedSend[topic] {
		return errResp(protocol.NoPermission, "sending message to topic[%s] is forbidden", topic)
	}
	return nil
}

// checkWritable checks the broker's role and write permission.
func (b *Broker) checkWritable() *protocol.Command {
	if ok, why := b.writable(); !ok {
		return errResp(protocol.ServiceNotAvailable, "the broker[%s] %s and does not accept messages", b.addr, why)
	}
	if b.perm.Load()&PermWrite == 0 {
		return errResp(protocol.NoPermission, "the broker[%s] sending message is forbidden", b.addr)
	}
	return nil
}

// noWriteQueue answers a send that left the queue to the broker (queueId
// < 0) to a topic with no write queue: writeQueueNums 0, RocketMQ's way to
// stop producing to a topic while its messages are still consumed, can
// come from a topic.json written by RocketMQ or by hand (Update refuses
// it). RocketMQ answers such a send SYSTEM_ERROR (its queue pick divides
// by zero); the remark here says why.
func noWriteQueue(tc *protocol.TopicConfig) *protocol.Command {
	return errResp(protocol.SystemError, "topic[%s] has no writable queue (writeQueueNums %d, readQueueNums %d): sending to it is stopped",
		tc.TopicName, tc.WriteQueueNums, tc.ReadQueueNums)
}

// topicWritable checks a topic's write permission.
func topicWritable(tc *protocol.TopicConfig, topic string) *protocol.Command {
	if tc.Perm&PermWrite == 0 {
		return errResp(protocol.NoPermission, "the topic[%s] sending message is forbidden", topic)
	}
	return nil
}

// sendTarget is checkSendable and sendTopicConfig. A send to the topic
// the last send found, in an unchanged topic table, skips the name checks
// and the lookup (TopicManager.sendable): the broker's role and
// permission and the topic's are checked on every send.
func (b *Broker) sendTarget(h *protocol.SendMessageRequestHeader) (*protocol.TopicConfig, *protocol.Command) {
	if tc, ok := b.topics.sendable(h.Topic); ok {
		if resp := b.checkWritable(); resp != nil {
			return nil, resp
		}
		return tc, topicWritable(tc, h.Topic)
	}
	if resp := b.checkSendable(h.Topic); resp != nil {
		return nil, resp
	}
	return b.sendTopicConfig(h)
}

// sendTopicConfig finds (or auto-creates) the topic a send goes to and
// checks its write permission. The topic passed checkSendable. The
// configuration returned is only read (the topic table's own, when the
// topic existed).
func (b *Broker) sendTopicConfig(h *protocol.SendMessageRequestHeader) (*protocol.TopicConfig, *protocol.Command) {
	tc, ok := b.topics.getSendable(h.Topic)
	if !ok {
		var made protocol.TopicConfig
		var err error
		if IsRetryTopic(h.Topic) {
			made, err = b.topics.CreateSystemTopic(h.Topic, 1, PermRW)
		} else {
			template := h.DefaultTopic
			if template == "" {
				template = AutoCreateTopicKey
			}
			made, err = b.topics.CreateOnSend(h.Topic, template, h.DefaultTopicQueueNums, 0)
		}
		if err != nil {
			if errors.Is(err, ErrTopicNotExist) {
				return nil, errResp(protocol.TopicNotExist, "topic[%s] not exist, apply first please! (%v)", h.Topic, err)
			}
			return nil, errResp(protocol.SystemError, "create topic %s: %v", h.Topic, err)
		}
		b.triggerRegister()
		tc = &made
	}
	return tc, topicWritable(tc, h.Topic)
}

// redirectRetry applies the retry-topic rules to a message sent to
// %RETRY%<group>: the group must exist, and past its maximum reconsume
// count the message goes to %DLQ%<group> instead.
func (b *Broker) redirectRetry(m *record.Message, h *protocol.SendMessageRequestHeader, clientVersion int32) *protocol.Command {
	group := strings.TrimPrefix(h.Topic, RetryGroupPrefix)
	g, err := b.groups.FindOrCreate(group)
	if err != nil {
		return errResp(protocol.SubscriptionGroupNotExist, "subscription group %s not exist", group)
	}
	maxTimes := g.RetryMaxTimes
	if clientVersion >= versionHonoursMaxReconsume && h.HasMaxReconsumeTimes {
		maxTimes = h.MaxReconsumeTimes
	}
	if m.ReconsumeTimes >= maxTimes {
		dlq := DLQTopic(group)
		if _, err := b.topics.CreateSystemTopic(dlq, 1, PermRW); err != nil {
			return errResp(protocol.SystemError, "create %s: %v", dlq, err)
		}
		b.plog.Warn("message moved to the dead-letter queue", "group", group, "reconsumeTimes", m.ReconsumeTimes, "max", maxTimes)
		m.Topic, m.QueueID = dlq, 0
	}
	return nil
}

// divertDelayed parks a message with a DELAY property in the schedule
// topic (queue level-1), remembering its real topic and queue; a
// transaction's half message goes to the half topic instead.
func (b *Broker) divertDelayed(m *record.Message) error {
	v, ok := record.LookupPropertyString(m.Properties, record.PropertyDelayLevel)
	return b.divertDelayedBy(m, v, ok)
}

// divertDelayedBy is divertDelayed for a message whose DELAY value was
// read already (v, present when ok).
func (b *Broker) divertDelayedBy(m *record.Message, v string, ok bool) error {
	switch m.SysFlag & record.TxMask {
	case record.TxPrepared:
		return b.divertHalf(m) // a transaction's half message waits in the half topic (transaction.go)
	case record.TxRollback:
		return nil
	}
	if !ok {
		return nil
	}
	level, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("DELAY property %q is not a number", v)
	}
	if level <= 0 {
		return nil
	}
	if level > len(b.opts.DelayLevels) {
		level = len(b.opts.DelayLevels)
		m.Properties = appendProperty(m.Properties, record.PropertyDelayLevel, strconv.Itoa(level))
	}
	m.Properties = appendProperty(m.Properties, record.PropertyRealTopic, m.Topic)
	m.Properties = appendProperty(m.Properties, record.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.Topic, m.QueueID = ScheduleTopic, int32(level-1)
	return nil
}

// illegalMessageRemark is the remark of RocketMQ's broker for a message
// its store refused as illegal (a body over maxMessageSize, max bytes).
func illegalMessageRemark(max int) string {
	return fmt.Sprintf("the message is illegal, maybe msg body or properties length not matched. msg body length limit %dB, msg properties length limit 32KB.", max)
}

// putStatusCode maps a stored message's status to the send response code.
func putStatusCode(s store.PutStatus) int32 {
	if s == store.PutFlushDiskTimeout {
		return protocol.FlushDiskTimeout
	}
	return protocol.Success
}

// putErrorResponse answers a put the store refused with status s and
// err: a message over the store's MaxMessageSize gets RocketMQ's
// MESSAGE_ILLEGAL and remark, other refusals the store's text.
func (b *Broker) putErrorResponse(s store.PutStatus, err error) *protocol.Command {
	switch s {
	case store.PutMessageIllegal:
		if errors.Is(err, store.ErrMessageTooLarge) {
			// RocketMQ's code and remark, as for a batch (putBatch).
			return errResp(protocol.MessageIllegal, "%s", illegalMessageRemark(b.maxBatchBody))
		}
		return errResp(protocol.MessageIllegal, "%v", err)
	case store.PutServiceNotAvailable:
		resp := errResp(protocol.ServiceNotAvailable, "service not available now: %v", err)
		if errors.Is(err, store.ErrDiskFull) {
			resp.ExtFields = protocol.ExtFields{protocol.FieldRefusal: protocol.RefusalDiskFull}
		}
		return resp
	default:
		return errResp(protocol.SystemError, "%v", err)
	}
}

// processSendBack serves CONSUMER_SEND_MSG_BACK: the message at offset goes
// to the group's retry topic with delay level 3 + reconsumeTimes (or the
// requested level), or to its dead-letter topic past the maximum.
//
// A send-back the broker cannot carry out (a full disk, a broker not
// writable, a failed put, ...) is not answered at all. An error answer
// loses the message with rocketmq-client-go, which takes any answer as
// done and moves past the message; without an answer its call times out
// (3 s) and it consumes the message again itself, as the Java client and
// SmartGo's do after a timeout or an error alike. The cost is the wait of
// the timeout, paid only while the broker refuses.
func (b *Broker) processSendBack(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ConsumerSendMsgBackRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad send-back header: %v", err), nil
	}
	if LongGroup(h.Group) {
		return b.sendBackOfLongGroup(h.Group)
	}
	resp := b.sendBack(req, &h)
	if resp.Code != protocol.Success {
		b.plog.Warn("send-back refused: not answered, so that the client consumes the message again itself",
			"group", h.Group, "offset", h.Offset, "code", resp.Code, "reason", resp.Remark)
		return nil, nil
	}
	return resp, nil
}

// sendBack carries out the send-back h and returns its answer.
func (b *Broker) sendBack(req *protocol.Command, h *protocol.ConsumerSendMsgBackRequestHeader) *protocol.Command {
	if ok, why := b.writable(); !ok {
		return errResp(protocol.ServiceNotAvailable, "the broker[%s] %s and does not accept messages", b.addr, why)
	}
	if b.perm.Load()&PermWrite == 0 {
		return errResp(protocol.NoPermission, "the broker[%s] sending message is forbidden", b.addr)
	}
	g, err := b.groups.FindOrCreate(h.Group)
	if err != nil {
		return errResp(protocol.SubscriptionGroupNotExist, "subscription group not exist, %s", h.Group)
	}
	if g.RetryQueueNums <= 0 {
		return protocol.NewResponse(protocol.Success, "") // retries disabled for the group
	}
	orig, err := b.store.ReadMessage(h.Offset)
	if err != nil {
		return errResp(protocol.SystemError, "look message by offset failed, %d: %v", h.Offset, err)
	}
	props, err := record.ParseProperties(orig.Properties)
	if err != nil {
		return errResp(protocol.SystemError, "stored message at %d has bad properties: %v", h.Offset, err)
	}
	if _, ok := props.Get(record.PropertyRetryTopic); !ok {
		props.Set(record.PropertyRetryTopic, orig.Topic)
	}
	if _, ok := props.Get(record.PropertyOriginMessageID); !ok {
		id := h.OriginMsgID
		if id == "" {
			id = record.OffsetMessageID(orig.StoreHost, orig.PhysicalOffset)
		}
		props.Set(record.PropertyOriginMessageID, id)
	}
	props.Del(record.PropertyWaitStoreMsgOK) // never stored; the re-put below does not wait
	props.Del(record.PropertyRealTopic)
	props.Del(record.PropertyRealQueueID)
	props.Del(record.PropertyCluster)

	maxTimes := g.RetryMaxTimes
	if req.Version >= versionHonoursMaxReconsume && h.HasMaxReconsumeTimes {
		maxTimes = h.MaxReconsumeTimes
	}
	m := &record.Message{
		Flag: orig.Flag, SysFlag: orig.SysFlag, BornTimestamp: orig.BornTimestamp, BornHost: orig.BornHost,
		ReconsumeTimes: orig.ReconsumeTimes + 1, Body: orig.Body,
	}
	delayLevel := h.DelayLevel
	if orig.ReconsumeTimes >= maxTimes || delayLevel < 0 {
		m.Topic, m.QueueID = DLQTopic(h.Group), 0
		_, existed := b.topics.Get(m.Topic)
		if _, err := b.topics.CreateSystemTopic(m.Topic, 1, PermRW); err != nil {
			return errResp(protocol.SystemError, "create %s: %v", m.Topic, err)
		}
		if !existed {
			b.triggerRegister() // publish the new DLQ's route, as Java does
		}
		props.Del(record.PropertyDelayLevel)
		b.plog.Warn("message moved to the dead-letter queue", "group", h.Group, "topic", orig.Topic,
			"msgId", h.OriginMsgID, "reconsumeTimes", orig.ReconsumeTimes, "max", maxTimes)
	} else {
		m.Topic = RetryTopic(h.Group)
		if _, err := b.topics.CreateSystemTopic(m.Topic, g.RetryQueueNums, PermRW); err != nil {
			return errResp(protocol.SystemError, "create %s: %v", m.Topic, err)
		}
		m.QueueID = int32(b.queueRR.Add(1) % uint32(g.RetryQueueNums))
		if delayLevel == 0 {
			delayLevel = 3 + orig.ReconsumeTimes
		}
		props.Set(record.PropertyDelayLevel, strconv.Itoa(int(delayLevel)))
	}
	props.Set(record.PropertyCluster, b.opts.ClusterName)
	m.Properties = props.String()
	if err := b.divertDelayed(m); err != nil {
		return errResp(protocol.SystemError, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), putTimeout)
	defer cancel()
	res, err := b.put(ctx, m, false)
	if err != nil {
		return b.putErrorResponse(res.Status, err)
	}
	b.stats.AddPut(m.Topic, 1, int64(len(m.Body)))
	return protocol.NewResponse(protocol.Success, "")
}

// peerAddr returns the connection's remote address (the born host).
func peerAddr(c *remoting.Conn) netip.AddrPort {
	if ap, ok := c.RemoteAddrPort(); ok {
		return ap
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)
}

// appendProperty appends key=value to an encoded properties string,
// replacing an existing value of key.
func appendProperty(props, key, value string) string {
	if _, ok := record.LookupPropertyString(props, key); ok {
		if p, err := record.ParseProperties(props); err == nil {
			p.Set(key, value)
			return p.String()
		}
	}
	var sb strings.Builder
	sb.Grow(len(props) + len(key) + len(value) + 2)
	sb.WriteString(props)
	if props != "" && props[len(props)-1] != record.PropertySeparator {
		sb.WriteByte(record.PropertySeparator)
	}
	sb.WriteString(key)
	sb.WriteByte(record.NameValueSeparator)
	sb.WriteString(value)
	return sb.String()
}
