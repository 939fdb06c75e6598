package bridge

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// Sends of one log: a batch request carries records of several Appends
// up to these bounds (a larger record goes alone). The broker bounds a
// whole batch by its store.max_message_size (4 MiB by default).
const (
	amqpBatchBytes = 256 << 10
	amqpBatchCount = 256
)

// amqpLog is the log of one durable AMQP queue (or of the definitions):
// queue 0 of its topic on one broker group.
//
// Offsets follow the order of the Append calls because one goroutine at a
// time (the sender, started by the first Append that finds none running)
// sends a log's records, in the order they were appended, each send only
// after the previous one was answered: one request at a time carries the
// records that arrived meanwhile (group commit), as an ordered batch
// (SendBatchOrderly: consecutive offsets in the queue; the SDK does not
// retry an ordered send elsewhere). A send that fails fails the Appends
// whose records it carried; a later send goes on after it (a send whose
// outcome is unknown may still have stored its records: the engine then
// finds them in the log, as at-least-once has it).
type amqpLog struct {
	b     *AMQPBackend
	topic string
	what  string // for errors: the queue's names, or the topic
	mq    client.MessageQueue

	mu      sync.Mutex
	pending []amqpAppend // protected by mu; not yet taken by the sender
	sending bool         // protected by mu; a sender runs
	closed  bool         // protected by mu
	stored  int64        // protected by mu; offset after the last record this log stored
	wg      sync.WaitGroup

	commitMu  sync.Mutex // serialises Commit and Committed
	committed int64      // protected by commitMu; -1 until read from the broker

	// indexed is set once a Read at the log's end saw the broker index
	// every message it had stored (waitIndexed); protected by mu.
	indexed bool
}

var _ amqp.QueueLog = (*amqpLog)(nil)

type amqpAppend struct {
	recs [][]byte
	done func(first uint64, err error)
}

// Append encodes msgs and queues them for the sender.
func (l *amqpLog) Append(msgs []amqp.StoredMessage, done func(first uint64, err error)) {
	// Every record in one buffer: one allocation for the Append, not
	// one per message.
	size := 0
	for i := range msgs {
		size += amqpRecordLen(&msgs[i])
	}
	buf := make([]byte, 0, size)
	recs := make([][]byte, 0, len(msgs))
	for i := range msgs {
		start := len(buf)
		var err error
		if buf, err = appendAMQPRecord(buf, &msgs[i]); err != nil {
			done(0, fmt.Errorf("bridge: append to AMQP %s: %w", l.what, err))
			return
		}
		recs = append(recs, buf[start:len(buf):len(buf)])
	}
	if len(recs) == 0 {
		done(0, fmt.Errorf("bridge: append to AMQP %s: no message", l.what))
		return
	}
	l.appendRecords(recs, done)
}

func (l *amqpLog) appendRecords(recs [][]byte, done func(first uint64, err error)) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		done(0, fmt.Errorf("bridge: append to AMQP %s: %w", l.what, ErrClosed))
		return
	}
	l.pending = append(l.pending, amqpAppend{recs: recs, done: done})
	if !l.sending {
		l.sending = true
		l.wg.Add(1)
		go l.send()
	}
	l.mu.Unlock()
}

// send stores the pending appends until there are none.
func (l *amqpLog) send() {
	defer l.wg.Done()
	var failed error // the last send's error
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.sending = false
			l.mu.Unlock()
			return
		}
		closing := l.closed
		n, size, count := 0, 0, 0
		for n < len(l.pending) {
			a := l.pending[n]
			s := 0
			for _, r := range a.recs {
				s += len(r)
			}
			if n > 0 && (size+s > amqpBatchBytes || count+len(a.recs) > amqpBatchCount) {
				break
			}
			size, count, n = size+s, count+len(a.recs), n+1
		}
		take := slices.Clone(l.pending[:n])
		clear(l.pending[:n])
		l.pending = l.pending[n:]
		l.mu.Unlock()
		if closing && failed != nil {
			// Closing with the broker failing: what is left fails at
			// once rather than a request timeout each.
			for _, a := range take {
				a.done(0, failed)
			}
			continue
		}
		failed = l.store(take)
	}
}

// store sends the records of appends in order, in batches within the
// bounds, and completes each append. It returns the first send error.
func (l *amqpLog) store(appends []amqpAppend) error {
	var recs [][]byte
	for _, a := range appends {
		recs = append(recs, a.recs...)
	}
	offs := make([]int64, 0, len(recs))
	var err error
	for start := 0; start < len(recs); {
		end, size := start, 0
		for end < len(recs) && (end == start || size+len(recs[end]) <= amqpBatchBytes && end-start < amqpBatchCount) {
			size += len(recs[end])
			end++
		}
		var first int64
		if first, err = l.sendBatch(recs[start:end]); err != nil {
			break
		}
		for i := range end - start {
			offs = append(offs, first+int64(i))
		}
		start = end
	}
	if len(offs) > 0 {
		l.mu.Lock()
		l.stored = max(l.stored, offs[len(offs)-1]+1)
		l.mu.Unlock()
	}
	i := 0
	for _, a := range appends {
		j := i + len(a.recs)
		switch {
		case j > len(offs):
			a.done(0, fmt.Errorf("bridge: append to AMQP %s: %w", l.what, err))
		case offs[j-1]-offs[i] != int64(j-i-1):
			// Another writer's records came between two sends of one
			// Append (a second node appending to the queue).
			a.done(0, fmt.Errorf("bridge: append to AMQP %s: the broker stored the messages at offsets %d..%d, not consecutive (another node writes this queue)",
				l.what, offs[i], offs[j-1]))
		default:
			a.done(uint64(offs[i]), nil)
		}
		i = j
	}
	return err
}

// sendBatch stores recs in order on the log's queue and returns the
// offset of the first.
func (l *amqpLog) sendBatch(recs [][]byte) (int64, error) {
	msgs := make([]*client.Message, len(recs))
	ms := make([]client.Message, len(recs)) // one allocation for the batch
	for i, r := range recs {
		ms[i] = client.Message{Topic: l.topic, Body: r}
		msgs[i] = &ms[i]
	}
	mq := l.mq
	res, err := l.b.prod.SendBatchOrderly(l.b.ctx, msgs, "", func([]client.MessageQueue, string) client.MessageQueue { return mq })
	if err != nil {
		l.b.storeFailed(mq.BrokerName, l.topic, err)
		return 0, fmt.Errorf("store %d messages in %s: %w", len(recs), l.topic, err)
	}
	if res.Status != client.SendOK {
		return 0, fmt.Errorf("store %d messages in %s: broker answered %v", len(recs), l.topic, res.Status)
	}
	if res.Queue != mq {
		return 0, fmt.Errorf("store %d messages in %s: stored on %v, not %v", len(recs), l.topic, res.Queue, mq)
	}
	return res.QueueOffset, nil
}

// Read pulls up to max messages from offset from. A record that cannot
// be decoded (not written by this backend) is skipped with a log line.
// Messages the broker no longer has (older than its retention) are
// skipped: the first returned then has a larger offset than from.
func (l *amqpLog) Read(ctx context.Context, from uint64, max int) ([]amqp.StoredMessage, error) {
	if max <= 0 {
		return nil, nil
	}
	max = min(max, admin.MaxBrowse)
	off := int64(from)
	deadline := time.Now().Add(l.b.opts.RequestTimeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, l.b.opts.RequestTimeout)
		msgs, _, minOff, maxOff, err := l.b.adm.BrowseMessages(cctx, l.topic, l.mq.BrokerName, 0, off, max)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bridge: read AMQP %s at offset %d: %w", l.what, off, err)
		}
		out := make([]amqp.StoredMessage, 0, len(msgs))
		for _, m := range msgs {
			sm, err := decodeAMQPRecord(m.Body)
			if err != nil {
				l.b.log.Warn("AMQP backend skips a message it cannot decode", "topic", l.topic, "offset", m.QueueOffset, "err", err)
				continue
			}
			sm.Offset = uint64(m.QueueOffset)
			out = append(out, sm)
		}
		if len(out) > 0 {
			return out, nil
		}
		l.mu.Lock()
		stored, indexed := l.stored, l.indexed
		l.mu.Unlock()
		switch {
		case len(msgs) > 0:
			off = msgs[len(msgs)-1].QueueOffset + 1
			continue
		case off < minOff:
			off = minOff
			continue
		case off >= maxOff && off >= stored && indexed:
			return nil, nil // at the end
		case off >= maxOff && off >= stored:
			// The end of what the broker indexed; the first time, make
			// sure it indexed everything it stored, then read again.
			if err := l.b.waitIndexed(ctx, l.topic, l.mq.BrokerName); err != nil {
				return nil, fmt.Errorf("bridge: read AMQP %s at offset %d: %w", l.what, off, err)
			}
			l.mu.Lock()
			l.indexed = true
			l.mu.Unlock()
			continue
		}
		// Stored but not yet in the consume queue (the broker indexes
		// a message a moment after it answered the send).
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bridge: read AMQP %s at offset %d: the broker has not indexed it after %v", l.what, off, l.b.opts.RequestTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bridge: read AMQP %s at offset %d: %w", l.what, off, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Committed returns AMQPOffsetGroup's offset on the log's queue (0 when
// it has none).
func (l *amqpLog) Committed(ctx context.Context) (uint64, error) {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	if err := l.readCommittedLocked(ctx); err != nil {
		return 0, err
	}
	return uint64(l.committed), nil
}

func (l *amqpLog) readCommittedLocked(ctx context.Context) error {
	if l.committed >= 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, l.b.opts.RequestTimeout)
	defer cancel()
	off, err := l.b.adm.GroupOffset(cctx, AMQPOffsetGroup, l.mq)
	if err != nil {
		return fmt.Errorf("bridge: committed offset of AMQP %s: %w", l.what, err)
	}
	l.committed = max(off, 0)
	return nil
}

// Commit stores offset as AMQPOffsetGroup's offset on the log's queue
// when it is above the committed one.
func (l *amqpLog) Commit(ctx context.Context, offset uint64) error {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	if err := l.readCommittedLocked(ctx); err != nil {
		return err
	}
	if int64(offset) <= l.committed {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, l.b.opts.RequestTimeout)
	defer cancel()
	if err := l.b.adm.CommitGroupOffset(cctx, AMQPOffsetGroup, l.mq, int64(offset)); err != nil {
		return fmt.Errorf("bridge: commit offset %d of AMQP %s: %w", offset, l.what, err)
	}
	l.committed = int64(offset)
	return nil
}

// Close waits for the pending appends' done calls; later Appends fail
// with ErrClosed.
func (l *amqpLog) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	l.b.forget(l)
	return nil
}
