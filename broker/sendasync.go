package broker

import (
	"errors"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
	"github.com/smartgo/smartgo/store/record"
)

// Asynchronous send replies.
//
// A send is answered when its message is stored and, if the send waits
// (its WAIT property, true by default), durable (FlushSync) and on a
// slave (RoleSyncMaster). No goroutine waits for that: processSend
// appends and returns; the store's flusher calls pendingSend.PutDone once
// the group commit covers the message, and for a sync master the HA
// server's ack loop calls back once a slave has it. Whoever completes the
// last wait writes the response with Conn.WriteResponse, which never
// blocks. A send needing neither wait is written behind by the store
// (store.PutAsyncDeferred, AsyncWriteMapped aside) and answered at the
// end of the reader's batch: the send processor's BatchEnd
// (processors.go) calls store.Drain, which writes the batch's records
// with one pwrite and calls pendingSend.PutDone for each once it is in
// the page cache, on the reader; the answers to the reader's own
// connection leave with the batch's other answers in the reader's write,
// and no other goroutine is woken for them (the store's dispatcher only
// when another drain is under way). The store's notes and the consume
// queues are dispatched by the same Drain.
//
// Sends not yet answered are bounded by the send pool's QueueSize per
// broker (acceptAsync): past it a send is refused with SYSTEM_BUSY, as a
// full pool queue would refuse it.

// pendingSend is one send request between its append and its answer.
type pendingSend struct {
	b     *Broker
	c     *remoting.Conn
	start time.Time // zero when the send is not timed (metrics.sendStart)
	// What the answer needs of the request, which the connection reuses
	// once processSend returned (remoting.RegisterOptions.NoKeep).
	opaque, flag int32
	st           protocol.SerializeType
	wait         bool   // the WAIT property: wait for the flush and the slave
	hasDelay     bool   // a DELAY property, whose value is delay
	delay        string // (aliases the request's header: valid while the processor runs)
	queueID      int32  // the queue the response names (the requested one)
	// counted: the store's round counted the stored send (sendTally)
	// before PutDone; PutDone does not count it again.
	counted bool
	// released: the round also counted it out of sendsInFlight
	// (sendTally); answer does not.
	released bool

	// Held here so that a send costs one allocation for all of them.
	h    protocol.SendMessageRequestHeader
	msg  record.Message
	resp protocol.Command                   // the answer, once (respond)
	hdr  protocol.SendMessageResponseHeader // its header (storedResponse)
	// The message's stored properties, when they fit, and the text of
	// the answer's msgId: each written once, then read through strings.
	props [pendingPropsLen]byte
	id    [record.OffsetMessageIDLenV6]byte
}

// pendingPropsLen is the room for a send's stored properties inside its
// pendingSend; longer ones take their own allocation. rocketmq-client-go's
// usual properties (UNIQ_KEY, TAGS, KEYS, CLUSTER) take about 100 bytes.
const pendingPropsLen = 256

// pendingPool recycles the pendingSends of answered sends (about 1 KiB
// each, with pointers the collector scans): a send answered later is put
// back once its answer is written (answer). Nothing may touch a
// pendingSend once it is handed to a callback that may answer it: the
// store's (PutAsyncDeferred: its Drain may run on another connection's
// reader at once), the group commit's or the HA server's.
var pendingPool = sync.Pool{New: func() any { return new(pendingSend) }}

// newPendingSend returns a pendingSend for a send on c.
func (b *Broker) newPendingSend(c *remoting.Conn, req *protocol.Command, start time.Time) *pendingSend {
	a := pendingPool.Get().(*pendingSend)
	a.b, a.c, a.start = b, c, start
	a.opaque, a.flag, a.st = req.Opaque, req.Flag, req.SerializeType
	return a
}

// recycle puts a back once its answer was written, zeroed: a stale
// reference finds no broker, connection or request.
func (a *pendingSend) recycle() {
	*a = pendingSend{}
	pendingPool.Put(a)
}

// respond is the answer to the send: code with hdr, written straight into
// the frame (protocol.Command.WithHeader). A send has one answer, so it
// is held in a.
func (a *pendingSend) respond(code int32, hdr *protocol.SendMessageResponseHeader) *protocol.Command {
	a.resp = protocol.Command{Code: code, Language: protocol.LanguageGo, Version: protocol.CurrentVersion, Flag: protocol.FlagResponse}
	return a.resp.WithHeader(hdr)
}

// acceptAsync counts a send in; false when too many wait for an answer.
func (b *Broker) acceptAsync() bool {
	if b.sendsInFlight.Add(1) > b.sendLimit {
		b.sendsInFlight.Add(-1)
		return false
	}
	return true
}

// release counts a send out.
func (a *pendingSend) release() { a.b.sendsInFlight.Add(-1) }

// unlessPending returns resp, counting the send out when there is one (a
// nil resp is answered later by a callback).
func (a *pendingSend) unlessPending(resp *protocol.Command) *protocol.Command {
	if resp != nil {
		a.release()
	}
	return resp
}

// answer writes the response of a send answered after processSend
// returned.
func (a *pendingSend) answer(resp *protocol.Command) {
	a.b.metrics.sendDone(a.start)
	req := protocol.Command{Opaque: a.opaque, Flag: a.flag, SerializeType: a.st}
	_ = a.c.WriteResponse(&req, resp) // encodes resp (often a.resp) into the write buffer
	if !a.released {
		a.release()
	}
	a.recycle()
}

// PutDone is the store's callback for a message answered later: one whose
// group commit the send waited for, or one written behind
// (store.PutDone).
func (a *pendingSend) PutDone(res store.PutResult, err error) {
	if !a.counted {
		a.b.rt.observePut(res.Latency)
	}
	if err != nil {
		a.answer(a.b.putErrorResponse(res.Status, err))
		return
	}
	if !a.counted {
		a.b.stats.AddPut(a.msg.Topic, 1, int64(len(a.msg.Body))) // before the answer (storeSend)
	}
	if resp := a.storedResponse(res); resp != nil {
		a.answer(resp)
	}
}

// storedResponse is the response for a stored message, or nil when the
// send waits for a slave (the HA callback answers then).
func (a *pendingSend) storedResponse(res store.PutResult) *protocol.Command {
	id := record.AppendOffsetMessageID(a.id[:0], res.StoreHost, res.PhysicalOffset) // not written again
	// Set in place (see sendOrAnswerLater's message).
	h := &a.hdr
	*h = protocol.SendMessageResponseHeader{}
	h.MsgID, h.QueueID, h.QueueOffset = unsafe.String(unsafe.SliceData(id), len(id)), a.queueID, res.QueueOffset
	h.Region, h.TraceOn = protocol.DefaultRegion, true
	return a.replicated(putStatusCode(res.Status), res.PhysicalOffset+int64(res.WroteBytes), &a.hdr)
}

// storedBatch is stored for a batch.
func (a *pendingSend) storedBatch(res store.BatchResult, err error) {
	a.b.rt.observePut(res.Latency)
	if err != nil {
		a.answer(a.b.putErrorResponse(res.Status, err))
		return
	}
	if resp := a.storedBatchResponse(res); resp != nil {
		a.answer(resp)
	}
}

// storedBatchResponse is storedResponse for a batch: the message ids of
// every record, joined by ','.
func (a *pendingSend) storedBatchResponse(res store.BatchResult) *protocol.Command {
	var ids strings.Builder
	var id [record.OffsetMessageIDLenV6]byte
	for i, phy := range res.PhysicalOffsets {
		idb := record.AppendOffsetMessageID(id[:0], res.StoreHost, phy)
		if i == 0 {
			ids.Grow(len(res.PhysicalOffsets) * (len(idb) + 1))
		} else {
			ids.WriteByte(',')
		}
		ids.Write(idb)
	}
	a.hdr = protocol.SendMessageResponseHeader{
		MsgID: ids.String(), QueueID: a.queueID, QueueOffset: res.QueueOffset, Region: protocol.DefaultRegion, TraceOn: true,
	}
	return a.replicated(putStatusCode(res.Status), res.End, &a.hdr)
}

// replicated applies the sync-master rule to a stored message ending at
// end: the response now, or nil when a slave's acknowledgement is awaited
// (the HA server calls back; see slaveCode for the codes).
func (a *pendingSend) replicated(code int32, end int64, hdr *protocol.SendMessageResponseHeader) *protocol.Command {
	b := a.b
	if code != protocol.Success || !a.waitsForSlave() {
		return a.respond(code, hdr)
	}
	srv := b.haSrv.Load()
	if srv == nil {
		if b.controlled() {
			code = protocol.SlaveNotAvailable // demoted while the message was being stored
		}
		return a.respond(code, hdr)
	}
	srv.WhenAcked(end, b.opts.SlaveAckTimeout, func(err error) {
		a.answer(a.respond(b.slaveCode(end, err), hdr))
	})
	return nil
}

// waitsForSlave reports whether the send, once stored, waits for a slave
// before it is answered (replicated).
func (a *pendingSend) waitsForSlave() bool { return a.wait && a.b.opts.Role == RoleSyncMaster }

// slaveCode maps the outcome of a wait for a slave to the send response
// code: SLAVE_NOT_AVAILABLE (none fit, or in controller mode a master past
// its lease) or FLUSH_SLAVE_TIMEOUT.
func (b *Broker) slaveCode(end int64, err error) int32 {
	switch {
	case err == nil:
		if b.controlled() && !b.leaseValid() {
			// Every member has it, but this broker may no longer be the
			// master: it does not acknowledge past its lease.
			return protocol.SlaveNotAvailable
		}
		return protocol.Success
	case errors.Is(err, ha.ErrSlaveNotAvailable):
		return protocol.SlaveNotAvailable
	default:
		b.log.Warn("slave did not acknowledge in time", "end", end, "err", err)
		return protocol.FlushSlaveTimeout
	}
}
