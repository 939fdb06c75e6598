package broker

import (
	"context"
	"fmt"
	"sync"
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
// order; protected by the shard's mutex (done is a channel).
type ssPendQueue struct {
	list []*StateStorePending
	// done receives one token per put of list the store answered (the
	// result is in the pending mutation): the drain that answers it may
	// run on another goroutine (a drain or dispatch round under way).
	done chan struct{}
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
	err     error
}

var ssPendings = sync.Pool{New: func() any { return new(StateStorePending) }}

// PutDone implements store.PutDone: the put's result, then a token for
// the shard's applier. It never blocks (at most maxPendingPerShard are
// outstanding per shard).
func (p *StateStorePending) PutDone(res store.PutResult, err error) {
	p.res, p.perr = res, err
	p.sh.pend.done <- struct{}{}
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
	sh.mu.Unlock()
	out, err, from, verb, start := p.out, p.err, p.from, p.verb, p.start
	entry := p.entry
	if cap(entry) > maxReusedEntry {
		entry = nil
	}
	*p = StateStorePending{entry: entry[:0]}
	ssPendings.Put(p)
	if err == nil {
		s.expiryDue(sh)
		s.reply(resp, out, from)
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
func (s *StateStore) InvokeDeferred(ctx context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) (*StateStorePending, error) {
	if cmd == nil || s.Waits(cmd) || (cmd.Verb != statestore.VerbSet && cmd.Verb != statestore.VerbDel && cmd.Verb != statestore.VerbVDel) {
		return nil, s.InvokeLocal(ctx, req, cmd, sink, resp)
	}
	var from ssPeer
	if sink != nil {
		from = s.sinkPeer(sink)
	}
	start, _ := s.metrics.timed()
	p, err := s.putDeferred(req, cmd, from, resp)
	if p == nil {
		s.metrics.observe(cmd, start, err)
		return nil, err
	}
	p.verb, p.start = ssVerbOf(cmd), start
	return p, nil
}

// putDeferred prepares a mutation and puts its record written behind,
// queued on its shard (InvokeDeferred); nil when answered at once.
func (s *StateStore) putDeferred(req *protocol.StateStoreRequest, cmd *statestore.Command, from ssPeer, resp *protocol.StateStoreResponse) (*StateStorePending, error) {
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
	p := ssPendings.Get().(*StateStorePending)
	now := s.b.now() // the entry's store-side clock and its record's born time
	entry, out, needsLog := sh.eng.PrepareAppend(p.entry[:0], &r, now)
	p.entry = entry
	if !needsLog {
		sh.mu.Unlock()
		p.entry = p.entry[:0]
		ssPendings.Put(p)
		s.reply(resp, out, from)
		return nil, nil
	}
	p.s, p.sh, p.from = s, sh, from
	if q.done == nil {
		q.done = make(chan struct{}, maxPendingPerShard)
	}
	s.host.entryRecord(&p.m, &sh.logShard, entry, now)
	if err := s.host.putBehind(&sh.logShard, &p.m, p); err != nil {
		sh.mu.Unlock()
		*p = StateStorePending{entry: entry[:0]}
		ssPendings.Put(p)
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
	if len(q.done) < len(q.list) {
		s.b.store.Drain()
	}
	// Answered by the drain above or, when another drain or a dispatch
	// round was under way, by that round: a wait for a lock held across
	// one pwrite.
	for range q.list {
		<-q.done
	}
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
	out, err := sh.eng.Apply(p.entry, time.UnixMilli(p.res.StoreTimestamp))
	if err != nil {
		return h.applyFailedLocked(&sh.logShard, p.res, err)
	}
	h.appliedLocked(&sh.logShard, p.res)
	p.out = out
	return nil
}
