package broker

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// Deferred mutations. A front end that serves a batch of requests on one
// goroutine (the MQTT poller's round, in standalone) serves a mutation in
// two steps so that the batch's records are written with one pwrite:
// InvokeDeferred prepares the entry and puts its record written behind,
// without draining the store (PutAsyncDeferred); Complete, at the batch's
// end, drains the store once (one pwrite for every record the batch put,
// on every shard), applies the shard's entries in log order and returns
// the response. A mutation is applied, and so visible to any GET, only
// once its record is in the page cache, as before, and answered after.
//
// The engine allows entries to be prepared before the earlier ones are
// applied (statestore.Engine.Prepare: conditions, fencing and the dedup
// cache are decided by Apply, in log order), so what must hold is that a
// shard applies its entries in the order they were put: the shard's
// pending list (ssPendQueue, under the shard's mutex) is in put order, and
// whoever takes the shard's mutex to put or apply anything else (a
// mutation served at once, an expiry, another batch's Complete) applies
// the pending entries first (applyPendingLocked). Their outcomes wait in
// them for their own Complete. A snapshot taken meanwhile covers what
// was applied: its NEXT stays at the first pending entry, which the log
// holds, so a restart replays it.

// maxPendingPerShard bounds a shard's pending list (and its token
// channel): a mutation that would pass it applies the list first.
const maxPendingPerShard = 256

// ssPendQueue is a shard's mutations put and not applied yet, in put
// order; list and free are protected by the shard's mutex.
//
// The store answers each put of list (PutDone) on the goroutine of the
// drain that wrote its record: mostly the applier's own Drain, sometimes
// a drain or dispatch round under way on another goroutine. answered
// counts the answers (the result is in the pending mutation, written
// before the count); the applier waits on wake only when it finds puts
// unanswered, after setting waiting, and an answer sends a token only
// when it finds waiting set. Both sides store, then load (sequentially
// consistent atomics), so one of them sees the other: either the applier
// finds the answer counted or the answer finds the applier waiting. A
// token sent to an applier that found the count complete after all stays
// in wake; the next wait takes it and counts again. Before, every answer
// sent a token on a channel the applier received each one from: a lock
// taken on each side per SET, on lines the other CPU wrote.
type ssPendQueue struct {
	list     []*StateStorePending
	answered atomic.Int32 // answers to puts of list
	waiting  atomic.Bool  // the applier waits on wake
	wake     chan struct{}
	// free holds recycled pending mutations (at most maxFreePending,
	// whose entry buffers hold at most maxFreeEntryBytes together): a
	// shard's are taken and given back under its mutex, which both sides
	// hold anyway, where a sync.Pool pinned the P and pushed onto and
	// popped from a chain of rings once each per SET.
	free      []*StateStorePending
	freeBytes int // capacity of the entry buffers in free
}

// Bounds of a shard's recycled pending mutations: a poller round puts a
// few dozen mutations at most on a shard, and what the free list keeps
// stays allocated for as long as the shard (a sync.Pool's is dropped by
// the collector).
const (
	maxFreePending    = 64
	maxFreeEntryBytes = 256 << 10
)

// get returns a recycled pending mutation or a new one. Called with the
// shard's mutex held.
func (q *ssPendQueue) get() *StateStorePending {
	if n := len(q.free); n > 0 {
		p := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		q.freeBytes -= cap(p.entry)
		return p
	}
	return new(StateStorePending)
}

// recycle resets p and keeps it for get, with its entry buffer unless
// that is too large to keep. Called with the shard's mutex held.
func (q *ssPendQueue) recycle(p *StateStorePending) {
	if len(q.free) == maxFreePending {
		*p = StateStorePending{} // the collector's
		return
	}
	entry := p.entry
	if c := cap(entry); c > maxReusedEntry || q.freeBytes+c > maxFreeEntryBytes {
		entry = nil
	}
	*p = StateStorePending{entry: entry[:0]}
	q.free = append(q.free, p)
	q.freeBytes += cap(entry)
}

// waitAnswered waits until the store answered every put of list. Called
// with the shard's mutex held (no put is added to list meanwhile).
func (q *ssPendQueue) waitAnswered() {
	for int(q.answered.Load()) < len(q.list) {
		q.waiting.Store(true)
		if int(q.answered.Load()) < len(q.list) {
			<-q.wake
		}
		q.waiting.Store(false)
	}
}

// StateStorePending is a mutation InvokeDeferred put in its shard's log;
// Complete applies and answers it, once. It is recycled by Complete.
type StateStorePending struct {
	s     *StateStore
	sh    *ssShard
	m     record.Message // the put's record (no allocation per put)
	entry []byte         // the prepared entry, reused by the next user
	from  ssPeer
	verb  int       // ssVerbOf, for the metrics
	start time.Time // the metrics' start (zero when not timed)

	// Set by PutDone, read after its token.
	res  store.PutResult
	perr error

	// Protected by the shard's mutex.
	applied bool
	out     statestore.Outcome
	queued  *ssNotes // out's notifications (statestore_order.go)
	err     error
}

// PutDone implements store.PutDone: the put's result, then its count for
// the shard's applier, woken if it waits (ssPendQueue). It never blocks.
func (p *StateStorePending) PutDone(res store.PutResult, err error) {
	p.res, p.perr = res, err
	q := &p.sh.pend
	q.answered.Add(1)
	if q.waiting.Load() {
		select {
		case q.wake <- struct{}{}:
		default: // a token is there already
		}
	}
}

// Complete applies the mutation, with every one of its shard put before
// it, once its record is in the page cache (draining the store's
// write-behind buffer when the records are not all written yet: one
// pwrite for every record put since the last drain), and sets resp to its
// response. Errors are those of InvokeLocal. p is recycled: it must not
// be used after.
func (p *StateStorePending) Complete(resp *protocol.StateStoreResponse) error {
	s, sh := p.s, p.sh
	sh.mu.Lock()
	if !p.applied {
		s.applyPendingLocked(sh)
	}
	out, err, from, verb, start, queued := p.out, p.err, p.from, p.verb, p.start, p.queued
	sh.pend.recycle(p)
	sh.mu.Unlock()
	if err == nil {
		s.expiryDue(sh)
		s.replyQueued(resp, out, from, sh, queued)
	}
	s.metrics.observeVerb(verb, start, err)
	return err
}

// InvokeDeferred is InvokeLocal for a mutation that may be applied and
// answered at the caller's batch end: a SET, DEL or VDEL that waits for
// nothing (Waits false). It returns the pending mutation, whose Complete
// the caller calls once, on any goroutine, at the end of its batch; or
// nil when the request was answered at once (resp set when the error is
// nil): a reply from the response cache, an error reply of the engine,
// or a request that is not such a mutation (served by InvokeLocal).
//
// now is the caller's reading of the wall clock (zero: none), taken
// before the request was handled, at most its batch's length earlier (the
// MQTT poller's round reading): the entry's store-side clock and its
// record's born time, so that a mutation reads the clock nowhere on its
// way (a read was 0.5 % of a SET's server CPU), and the store's put
// starts from it too (store.PutAsyncDeferredAt: no clock read for the
// record's store time, 0.5 % more). A reading that old can only make the
// entry's version's wall part (raised to the shard's newest anyway), the
// response cache's expiry check, the timestamp skew check and the
// record's store time (by which Apply counts a key's expiry; never before
// the store's previous put's unless more than a second before it) lag
// the real clock by that length. A broker with a clock of its own
// (Options.Now) reads that instead.
func (s *StateStore) InvokeDeferred(ctx context.Context, now time.Time, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) (*StateStorePending, error) {
	if cmd == nil || s.Waits(cmd) || (cmd.Verb != statestore.VerbSet && cmd.Verb != statestore.VerbDel && cmd.Verb != statestore.VerbVDel) {
		return nil, s.InvokeLocal(ctx, req, cmd, sink, resp)
	}
	var from ssPeer
	if sink != nil {
		from = s.sinkPeer(sink)
	}
	start, _ := s.metrics.timed()
	p, err := s.putDeferred(now, req, cmd, from, resp)
	if p == nil {
		s.metrics.observe(cmd, start, err)
		return nil, err
	}
	p.verb, p.start = ssVerbOf(cmd), start
	return p, nil
}

// putDeferred prepares a mutation and puts its record written behind,
// queued on its shard (InvokeDeferred); nil when answered at once.
func (s *StateStore) putDeferred(now time.Time, req *protocol.StateStoreRequest, cmd *statestore.Command, from ssPeer, resp *protocol.StateStoreResponse) (*StateStorePending, error) {
	sh, err := s.admit(req, cmd, from)
	if err != nil {
		return nil, err
	}
	r := s.engineRequest(req, cmd)
	sh.mu.Lock()
	q := &sh.pend
	if len(q.list) == maxPendingPerShard {
		s.applyPendingLocked(sh)
	}
	if sh.failed != nil {
		err := sh.failed
		sh.mu.Unlock()
		return nil, fmt.Errorf("%w: shard %d: %w", ErrStateStoreFailed, sh.id, err)
	}
	p := q.get()
	if now.IsZero() || !s.wallClock {
		now = s.b.now() // the entry's store-side clock and its record's born time
	}
	entry, out, needsLog := sh.eng.PrepareAppend(p.entry[:0], &r, now)
	p.entry = entry
	if !needsLog {
		q.recycle(p)
		sh.mu.Unlock()
		s.reply(resp, out, from)
		return nil, nil
	}
	p.s, p.sh, p.from = s, sh, from
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	s.host.entryRecord(&p.m, &sh.logShard, entry, now)
	var began time.Time // the put's start for the store; zero: it reads its clock
	if s.wallClock {
		began = now
	}
	if err := s.host.putBehind(&sh.logShard, &p.m, p, began); err != nil {
		q.recycle(p)
		sh.mu.Unlock()
		return nil, err
	}
	p.m = record.Message{} // the store copied the record
	q.list = append(q.list, p)
	sh.mu.Unlock()
	return p, nil
}

// applyPendingLocked applies the shard's pending mutations in put order,
// after draining the store when some of their records are not written
// yet, and keeps each one's outcome for its Complete. Called with sh.mu
// held.
func (s *StateStore) applyPendingLocked(sh *ssShard) {
	q := &sh.pend
	if len(q.list) == 0 {
		return
	}
	if int(q.answered.Load()) < len(q.list) {
		s.b.store.Drain()
	}
	// Answered by the drain above or, when another drain or a dispatch
	// round was under way, by that round: a wait for a lock held across
	// one pwrite.
	q.waitAnswered()
	q.answered.Add(-int32(len(q.list)))
	for i, p := range q.list {
		q.list[i] = nil
		p.applied = true
		p.err = s.applyPutLocked(sh, p)
	}
	q.list = q.list[:0]
}

// applyPutLocked applies one pending mutation whose put was answered.
func (s *StateStore) applyPutLocked(sh *ssShard, p *StateStorePending) error {
	h := &s.host
	switch {
	case sh.failed != nil:
		return fmt.Errorf("%w: shard %d: %w", ErrStateStoreFailed, sh.id, sh.failed)
	case p.perr != nil:
		// Not stored (a full disk took it back): nothing changed.
		return fmt.Errorf("%w: append to shard %d: %w", ErrStateStoreUnavailable, sh.id, p.perr)
	}
	if err := h.storedAtLocked(&sh.logShard, p.res); err != nil {
		return err
	}
	// p.entry is the buffer PrepareAppend filled, never read back.
	out, err := sh.eng.ApplyOwn(p.entry, time.UnixMilli(p.res.StoreTimestamp))
	if err != nil {
		return h.applyFailedLocked(&sh.logShard, p.res, err)
	}
	h.appliedLocked(&sh.logShard, p.res)
	p.out = out
	p.queued = s.queueNotes(sh, out.Notifications, p.from == nil)
	return nil
}
