package client

import (
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// onResetOffset applies a broker's RESET_CONSUMER_CLIENT_OFFSET (220,
// sent when an admin resets the group's offsets: mqadmin
// resetOffsetByTime, smartgo admin offset reset): each queue of the table
// this consumer holds is dropped, with what it had pulled and not
// consumed, and pulled again from its new offset, which is also what the
// consumer commits next. Queues it does not hold are left alone (the
// broker committed them). It answers nothing (the broker sends it one
// way).
func (b *consumerBase) onResetOffset(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ResetOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil || h.Group != b.opts.Group {
		b.core.log.Warn("offset reset notice ignored", "group", h.Group, "err", err)
		return nil, nil
	}
	var body protocol.ResetOffsetBody
	if err := protocol.DecodeJSON(req.Body, &body); err != nil {
		b.core.log.Warn("offset reset notice ignored", "group", h.Group, "topic", h.Topic, "err", err)
		return nil, nil
	}
	n := 0
	for _, e := range body.OffsetTable {
		mq := MessageQueue{Topic: e.Queue.Topic, BrokerName: e.Queue.BrokerName, QueueID: e.Queue.QueueID}
		b.qmu.Lock()
		pq := b.queues[mq]
		b.qmu.Unlock()
		if pq == nil {
			continue
		}
		b.offsets.update(mq, e.Value, false)
		b.restartQueueAt(mq, pq.sub, e.Value)
		n++
	}
	b.core.log.Info("offsets reset by the broker", "group", h.Group, "topic", h.Topic, "queues", n)
	return nil, nil
}

// restartQueueAt replaces mq's process queue (if any: it is dropped, and
// its orderly lock passes on) with one pulling from off.
func (b *consumerBase) restartQueueAt(mq MessageQueue, sub *subscription, off int64) {
	pq := newProcessQueue(b.core.ctx, mq, sub, off)
	b.qmu.Lock()
	if old := b.queues[mq]; old != nil {
		old.drop()
		pq.brokerID.Store(old.brokerID.Load())
		if old.locked.Load() {
			pq.setLocked(old.lockedAt.Load())
		}
	}
	b.queues[mq] = pq
	b.qmu.Unlock()
	b.startQueue(pq)
}
