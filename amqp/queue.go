package amqp

import (
	"fmt"
	"slices"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// msgData is a published message, shared by every queue it was routed to.
type msgData struct {
	exchange, key string
	props         []byte // content header property flags and list, as received
	body          []byte
}

func (m *msgData) size() int64 { return int64(len(m.body)) }

// qmsg is one message in one queue.
type qmsg struct {
	m           *msgData
	seq         uint64 // position in the queue: requeues go back in seq order
	expireAt    int64  // unix nanoseconds; 0: never
	offset      uint64 // in the queue's log, when durable and stored
	stored      bool   // offset is valid
	gone        bool   // left the queue (acked, dropped) before it was stored
	redelivered bool
	prio        uint8 // priority level in the queue
}

// Overflow behaviours of x-overflow.
const (
	overflowDropHead = iota
	overflowRejectPublish
	overflowRejectPublishDLX
)

// queueArgs are the queue arguments the engine implements (see doc.go).
type queueArgs struct {
	maxLen   int64 // -1: none
	maxBytes int64 // -1: none
	overflow int
	ttl      int64 // x-message-ttl in ms; -1: none
	expires  int64 // x-expires in ms; 0: none
	dlx      string
	hasDLX   bool
	dlrk     string
	hasDLRK  bool
	maxPrio  uint8 // x-max-priority; 0: none
	// singleActive: x-single-active-consumer; only the longest-standing
	// consumer gets messages.
	singleActive bool
}

// parseQueueArgs validates the known arguments of queue.declare; unknown
// ones are accepted and ignored, as RabbitMQ does.
func parseQueueArgs(t wire.Table) (queueArgs, error) {
	a := queueArgs{maxLen: -1, maxBytes: -1, ttl: -1}
	nonNeg := func(k string, min int64) (int64, bool, error) {
		v, ok := t[k]
		if !ok {
			return 0, false, nil
		}
		n, isInt := wire.AsInt64(v)
		if !isInt {
			return 0, false, fmt.Errorf("invalid arg '%s' for queue: %T is not an integer", k, v)
		}
		if n < min {
			return 0, false, fmt.Errorf("invalid arg '%s' for queue: %d is below %d", k, n, min)
		}
		return n, true, nil
	}
	var err error
	var ok bool
	var n int64
	if n, ok, err = nonNeg("x-max-length", 0); err != nil {
		return a, err
	} else if ok {
		a.maxLen = n
	}
	if n, ok, err = nonNeg("x-max-length-bytes", 0); err != nil {
		return a, err
	} else if ok {
		a.maxBytes = n
	}
	if n, ok, err = nonNeg("x-message-ttl", 0); err != nil {
		return a, err
	} else if ok {
		a.ttl = n
	}
	if n, ok, err = nonNeg("x-expires", 1); err != nil {
		return a, err
	} else if ok {
		a.expires = n
	}
	if v, ok := t["x-overflow"]; ok {
		s, _ := stringArg(v)
		switch s {
		case "drop-head":
			a.overflow = overflowDropHead
		case "reject-publish":
			a.overflow = overflowRejectPublish
		case "reject-publish-dlx":
			a.overflow = overflowRejectPublishDLX
		default:
			return a, fmt.Errorf("invalid arg 'x-overflow' for queue: %v is not drop-head, reject-publish or reject-publish-dlx", v)
		}
	}
	if v, ok := t["x-dead-letter-exchange"]; ok {
		if a.dlx, ok = stringArg(v); !ok {
			return a, fmt.Errorf("invalid arg 'x-dead-letter-exchange' for queue: %T is not a string", v)
		}
		a.hasDLX = true
	}
	if v, ok := t["x-dead-letter-routing-key"]; ok {
		if a.dlrk, ok = stringArg(v); !ok {
			return a, fmt.Errorf("invalid arg 'x-dead-letter-routing-key' for queue: %T is not a string", v)
		}
		if !a.hasDLX {
			return a, fmt.Errorf("invalid arg 'x-dead-letter-routing-key' for queue: it needs x-dead-letter-exchange")
		}
		a.hasDLRK = true
	}
	if v, ok := t["x-queue-type"]; ok {
		if s, _ := stringArg(v); s != "classic" {
			return a, fmt.Errorf("invalid arg 'x-queue-type' for queue: only classic queues are implemented, not %v", v)
		}
	}
	if n, ok, err = nonNeg("x-max-priority", 0); err != nil {
		return a, err
	} else if ok {
		if n > 255 {
			return a, fmt.Errorf("invalid arg 'x-max-priority' for queue: %d is above 255", n)
		}
		a.maxPrio = uint8(n)
	}
	if v, ok := t["x-single-active-consumer"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return a, fmt.Errorf("invalid arg 'x-single-active-consumer' for queue: %T is not a boolean", v)
		}
		a.singleActive = b
	}
	if v, ok := t["x-queue-mode"]; ok && v != "default" && v != "lazy" {
		// lazy only changes where RabbitMQ keeps messages.
		return a, fmt.Errorf("invalid arg 'x-queue-mode' for queue: %v is not default or lazy", v)
	}
	// x-queue-master-locator and x-queue-leader-locator place a queue in a
	// cluster: meaningless here, accepted as unknown arguments are.
	for _, k := range []string{"x-stream-max-segment-size-bytes", "x-max-age"} {
		if _, ok := t[k]; ok {
			return a, fmt.Errorf("invalid arg '%s' for queue: streams are not implemented by this server", k)
		}
	}
	return a, nil
}

func stringArg(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// knownQueueArgs are compared on redeclare (RabbitMQ's equivalence check).
var knownQueueArgs = []string{"x-max-length", "x-max-length-bytes", "x-overflow", "x-message-ttl", "x-max-priority", "x-single-active-consumer",
	"x-expires", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-queue-type"}

func queueArgsEquivalent(a, b wire.Table) (string, bool) {
	for _, k := range knownQueueArgs {
		av, aok := a[k]
		bv, bok := b[k]
		if k == "x-queue-type" && (!aok || !bok) {
			continue
		}
		if aok != bok || (aok && !valuesEqual(av, bv)) {
			return k, false
		}
	}
	return "", true
}

// queue is one queue of a virtual host. Guarded by Server.mu.
type queue struct {
	vh                             *vhost
	name                           string
	durable, exclusive, autoDelete bool
	owner                          *conn // exclusive queues
	args                           wire.Table
	argsRaw                        []byte
	qa                             queueArgs
	levels                         []msgList // ready messages by priority (one level without x-max-priority)
	nReady                         int
	readyBytes                     int64
	nextSeq                        uint64
	unacked                        int
	consumers                      []*consumer
	rr                             int
	hadConsumer                    bool
	prioConsumers                  int        // consumers with a non-zero x-priority
	bindings                       []*binding // bindings whose destination is this queue
	deleted                        bool
	lastUse                        time.Time
	dur                            *durableQueue // nil unless durable on a Backend
	counts                         queueCounts   // for Server.Queues
}

// msgList is a FIFO of messages in seq order.
type msgList struct {
	items []*qmsg // live from head
	head  int
}

func (l *msgList) len() int { return len(l.items) - l.head }

func (l *msgList) peek() *qmsg { return l.items[l.head] }

func (l *msgList) pop() *qmsg {
	m := l.items[l.head]
	l.items[l.head] = nil
	l.head++
	if l.head == len(l.items) {
		l.items, l.head = l.items[:0], 0
	} else if l.head > 1024 && l.head*2 > len(l.items) {
		n := copy(l.items, l.items[l.head:])
		clear(l.items[n:])
		l.items, l.head = l.items[:n], 0
	}
	return m
}

// insert puts m at its seq position.
func (l *msgList) insert(m *qmsg) {
	live := l.items[l.head:]
	i, _ := slices.BinarySearchFunc(live, m.seq, func(e *qmsg, s uint64) int {
		switch {
		case e.seq < s:
			return -1
		case e.seq > s:
			return 1
		}
		return 0
	})
	if i == 0 && l.head > 0 {
		l.head--
		l.items[l.head] = m
	} else {
		l.items = slices.Insert(l.items, l.head+i, m)
	}
}

func (q *queue) readyLen() int { return q.nReady }

// top is the list the next message comes from: the highest priority
// with messages. nil when none is ready.
func (q *queue) top() *msgList {
	for i := len(q.levels) - 1; i >= 0; i-- {
		if q.levels[i].len() > 0 {
			return &q.levels[i]
		}
	}
	return nil
}

func (q *queue) peek() *qmsg {
	if l := q.top(); l != nil {
		return l.peek()
	}
	return nil
}

func (q *queue) pop() *qmsg {
	m := q.top().pop()
	q.nReady--
	q.readyBytes -= m.m.size()
	return m
}

// pushReady appends a new message at the tail of its priority.
func (q *queue) pushReady(m *qmsg) {
	l := &q.levels[min(int(m.prio), len(q.levels)-1)]
	l.items = append(l.items, m)
	q.nReady++
	q.readyBytes += m.m.size()
}

// requeue puts m back at its position among the ready messages.
func (q *queue) requeue(m *qmsg) {
	m.redelivered = true
	q.levels[min(int(m.prio), len(q.levels)-1)].insert(m)
	q.nReady++
	q.readyBytes += m.m.size()
}

// clearReady drops every ready message.
func (q *queue) clearReady() {
	for i := range q.levels {
		q.levels[i] = msgList{}
	}
	q.nReady, q.readyBytes = 0, 0
}

// expiry computes a message's expiry in this queue from x-message-ttl and
// the message's expiration property (milliseconds), the earlier winning.
func (q *queue) expiry(now time.Time, msgTTL int64) int64 {
	ttl := q.qa.ttl
	if msgTTL >= 0 && (ttl < 0 || msgTTL < ttl) {
		ttl = msgTTL
	}
	if ttl < 0 {
		return 0
	}
	return now.Add(time.Duration(ttl) * time.Millisecond).UnixNano()
}
