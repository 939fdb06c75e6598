package bridge

import (
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
)

// Resume points above offsets given again.
//
// A session record says, per queue, from which offset its session
// resumes ("from"). When the queue's broker then loses its log's tail (a
// crash under async flush, a damaged record cut at recovery, a slave
// promoted behind its dead master), it gives the lost offsets again to
// new messages, and those below "from" are new messages the session never
// got. The record kept by another broker survives the cut; resumed from
// it as it stands, the session skipped them.
//
// So a resume point also names the message at from-1 as the node had
// delivered it ("prev", when the node's ring of recent deliveries held
// it). LoadSession checks it before the replay: this node's ring holding
// the same message at that offset is enough (no request); otherwise the
// message at from-1 is read from the broker (one pull; resumes from the
// same point within checkTTL share it, so a storm of resumes after a
// restart costs one a queue). Another message there, or a queue that now
// ends at or below it, means the offsets were given again: the point
// goes back to the first message stored after the recorded one
// (SEARCH_OFFSET_BY_TIMESTAMP, store time after prev's: the messages at
// the reused offsets were stored after the broker's restart, later than
// any it lost; a broker clock that went back breaks this), no further
// than from-1. Its live position goes back with it (those messages are
// delivered as new), and its pending offsets, all at or above its From,
// are forgotten: the messages they named were lost with the log's tail.
// A point without "prev" (earlier versions' records, a queue with no
// delivery on the writing node since its start, or one older than its
// ring) is resumed as it stands, as is one whose from-1 is gone
// (retention) or could not be read.

// prevRecord is how a resume point names a message (a storedID without
// its UNIQ_KEY, which would double the size of a record's points): its
// store and born times (ms) and its body's length. A message stored at
// a reused offset after its broker's restart has a later store time.
type prevRecord struct {
	Store int64 `json:"store"`
	Born  int64 `json:"born"`
	Size  int   `json:"size"`
}

func (p *prevRecord) matches(id storedID) bool {
	return p.Store == id.store && p.Born == id.born && p.Size == id.size
}

func prevOf(id storedID) *prevRecord {
	return &prevRecord{Store: id.store, Born: id.born, Size: id.size}
}

// atLocked returns the delivery at off that qs's ring holds.
func (qs *queueState) atLocked(off int64) (delivery, bool) {
	i := sort.Search(len(qs.ring), func(i int) bool { return qs.ring[i].offset >= off })
	if i == len(qs.ring) || qs.ring[i].offset != off {
		return delivery{}, false
	}
	return qs.ring[i], true
}

// notePrevLocked sets each point's Prev: the message at From-1 where
// this node's ring holds it, else none.
func (b *Backend) notePrevLocked(points map[client.MessageQueue]*resumePoint) {
	for q, rp := range points {
		rp.Prev = nil
		if qs := b.queues[q]; qs != nil && rp.From > 0 {
			if d, ok := qs.atLocked(rp.From - 1); ok {
				rp.Prev = prevOf(d.id)
			}
		}
	}
}

// reusedBack returns a copy of rec's resume points where those whose
// queue gave offsets below their From again moved back to the first of
// them (see above), and true; rec.Resume and false when none moved.
func (b *Backend) reusedBack(ctx context.Context, rec *sessionRecord) ([]resumePoint, bool) {
	var check []int
	b.mu.Lock()
	for i, rp := range rec.Resume {
		if rp.Prev == nil || rp.From <= 0 {
			continue
		}
		qs := b.queues[rp.mq()]
		if qs == nil {
			continue // not consumed here: the replay skips it
		}
		if d, ok := qs.atLocked(rp.From - 1); ok && rp.Prev.matches(d.id) {
			continue
		}
		check = append(check, i)
	}
	b.mu.Unlock()
	if len(check) == 0 {
		return rec.Resume, false
	}
	firsts := make([]int64, len(check))
	var wg sync.WaitGroup
	for k, i := range check {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rp := &rec.Resume[i]
			// Shared by other resumes: not ended by this one's ctx.
			firsts[k] = b.checks.first(pointKey{rp.mq(), rp.From, *rp.Prev}, func() (int64, bool) {
				return b.firstReused(context.WithoutCancel(ctx), rp)
			})
		}()
	}
	wg.Wait()
	var out []resumePoint
	for k, i := range check {
		first := firsts[k]
		if first >= rec.Resume[i].From {
			continue
		}
		if out == nil {
			out = slices.Clone(rec.Resume)
		}
		rp := &out[i]
		// From is at or below every pending offset: all were given again.
		rp.From, rp.Live, rp.Prev = first, min(rp.Live, first), nil
		rp.Pending, rp.Sent, rp.SentIDs = nil, nil, nil
	}
	if out == nil {
		return rec.Resume, false
	}
	b.log.Info("bridge: session resumed from queue offsets given again", "client", rec.ClientID)
	return out, true
}

// firstReused reads the message at rp.From-1 from its broker and
// returns rp.From when it is the one rp names, else the first offset
// the queue gave again. A read that fails returns rp.From and false.
func (b *Backend) firstReused(ctx context.Context, rp *resumePoint) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.SendTimeout)
	defer cancel()
	at := rp.From - 1
	msgs, _, minOff, maxOff, err := b.adm.BrowseMessages(ctx, rp.Topic, rp.Broker, rp.Queue, at, 1)
	if err != nil {
		b.log.Warn("bridge: session resume point not checked against its queue", "queue", rp.mq(), "err", err)
		return rp.From, false
	}
	switch {
	case at < minOff:
		return rp.From, true // gone (retention): nothing to compare with
	case len(msgs) > 0 && msgs[0].QueueOffset == at:
		if rp.Prev.matches(storedIDOf(msgs[0])) {
			return rp.From, true
		}
	case at < maxOff:
		return rp.From, false // not read (the broker asked for a retry): as it stands
	}
	// Another message at from-1, or the queue ends at or below it.
	first, err := b.adm.OffsetByTime(ctx, rp.mq(), time.UnixMilli(rp.Prev.Store+1))
	if err != nil {
		b.log.Warn("bridge: first offset given again not found; resuming from the last one checked",
			"queue", rp.mq(), "err", err)
		first = at
	}
	first = min(first, at, maxOff)
	b.log.Warn("bridge: session resume point above queue offsets given again (the broker lost its log's tail): resuming from there",
		"queue", rp.mq(), "from", rp.From, "to", first)
	return first, true
}

// checkTTL is how long a check of a resume point against its queue
// stands for other resumes from the same point (a storm of resumes after
// a node's restart shares one per queue). A broker cannot lose its tail
// and refill the queue in that time.
const checkTTL = time.Second

// pointKey is a resume point as checked: its queue, From and Prev.
type pointKey struct {
	q    client.MessageQueue
	from int64
	prev prevRecord
}

// pointCheck is one check: first is its result once done is closed.
// A check that failed is forgotten at once (the next resume checks
// again); those waiting for it take its result (the point as it stands).
type pointCheck struct {
	done  chan struct{}
	first int64
	at    time.Time
}

// pointChecks are the checks of the last checkTTL: concurrent resumes
// from one point wait for one check.
type pointChecks struct {
	mu sync.Mutex
	m  map[pointKey]*pointCheck // protected by mu
}

// first returns the result of check for k: a check of k started less
// than checkTTL ago, or a new one.
func (p *pointChecks) first(k pointKey, check func() (int64, bool)) int64 {
	now := time.Now()
	p.mu.Lock()
	c := p.m[k]
	if c == nil || now.Sub(c.at) >= checkTTL {
		if p.m == nil {
			p.m = map[pointKey]*pointCheck{}
		}
		if len(p.m) >= 1024 {
			maps.DeleteFunc(p.m, func(_ pointKey, c *pointCheck) bool { return now.Sub(c.at) >= checkTTL })
		}
		c = &pointCheck{done: make(chan struct{}), at: now}
		p.m[k] = c
		p.mu.Unlock()
		first, ok := check()
		c.first = first
		close(c.done)
		if !ok {
			p.mu.Lock()
			if p.m[k] == c {
				delete(p.m, k)
			}
			p.mu.Unlock()
		}
		return first
	}
	p.mu.Unlock()
	<-c.done
	return c.first
}
