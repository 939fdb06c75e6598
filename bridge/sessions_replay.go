package bridge

import (
	"context"
	"sort"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// replayed is one message read back from the log.
type replayed struct {
	ts  int64 // store time, ms
	pos int64 // commitlog offset: the order within one broker
	q   client.MessageQueue
	off int64 // queue offset
	p   mqtt.Pending
}

// replay reads the queues of rec's resume points from their start up to
// the live consumer's position, keeping the pending offsets and, from the
// live point on, what matches the subscriptions. The last stretch runs
// with live delivery paused, released shortly after return. It returns
// what it kept in delivery order and, per queue, the offset it read up
// to (also with an error, once it got to reading).
func (b *Backend) replay(ctx context.Context, rec *sessionRecord) ([]replayed, map[client.MessageQueue]int64, error) {
	type qr struct {
		rp      resumePoint
		pending map[int64]bool   // offset -> sent before
		ids     map[int64]uint16 // offset -> packet id it was sent with
		next    int64
	}
	// However replay ends, live delivery is paused on return until
	// shortly after, for the server to install the session.
	paused := false
	defer func() {
		if !paused {
			b.pause()
		}
		time.AfterFunc(gateHold, b.unpause)
	}()
	b.waitLive(ctx, rec.Resume)
	work := map[client.MessageQueue]*qr{}
	need := false
	b.mu.Lock()
	for _, rp := range rec.Resume {
		qs := b.queues[rp.mq()]
		if qs == nil {
			continue
		}
		need = need || qs.next > rp.From
		r := &qr{rp: rp, pending: map[int64]bool{}, next: rp.From}
		for _, o := range rp.Pending {
			r.pending[o] = false
		}
		for i, o := range rp.Sent {
			if _, ok := r.pending[o]; ok {
				r.pending[o] = true
				if len(rp.SentIDs) == len(rp.Sent) && rp.SentIDs[i] != 0 {
					if r.ids == nil {
						r.ids = map[int64]uint16{}
					}
					r.ids[o] = rp.SentIDs[i]
				}
			}
		}
		work[rp.mq()] = r
	}
	b.mu.Unlock()
	// ends is, per queue, how far the replay got: what it kept is all
	// the session is owed before that (also when it fails on the way).
	ends := func() map[client.MessageQueue]int64 {
		m := make(map[client.MessageQueue]int64, len(work))
		for q, r := range work {
			m[q] = r.next
		}
		return m
	}
	if !need {
		// Nothing to read unless a message arrives now: check again
		// with delivery paused.
		b.pause()
		paused = true
		b.mu.Lock()
		for q, r := range work {
			need = need || b.queues[q].next > r.rp.From
		}
		b.mu.Unlock()
		if !need {
			return nil, nil, nil
		}
		b.unpause()
		paused = false
	}
	qs := make([]client.MessageQueue, 0, len(work))
	for q := range work {
		qs = append(qs, q)
	}
	rctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	key := replayKey(qs)
	c, err := b.replayConsumer(rctx, key, qs)
	if err != nil {
		return nil, ends(), err
	}
	reusable := false
	defer func() {
		if reusable {
			b.replays.put(key, c)
		} else {
			c.Close()
			b.replays.drop(key)
		}
	}()
	for q, r := range work {
		if err := c.Seek(q, r.rp.From); err != nil {
			return nil, ends(), err
		}
	}
	subs := rec.Subscriptions
	var out []replayed
	var held []*client.MessageExt // read beyond the first target
	take := func(x *client.MessageExt) {
		r := work[x.Queue]
		if r == nil || x.QueueOffset < r.next {
			return
		}
		if x.QueueOffset > r.next {
			b.log.Warn("bridge: offline messages no longer in the log (retention) skipped", "client", rec.ClientID,
				"queue", x.Queue, "from", r.next, "to", x.QueueOffset)
		}
		r.next = x.QueueOffset + 1
		m := fromBroker(x)
		if !packets.ValidTopicName(m.Topic) || !m.Expiry.IsZero() && !time.Now().Before(m.Expiry) {
			return
		}
		var p mqtt.Pending
		if sent, ok := r.pending[x.QueueOffset]; ok {
			p = deliveryOf(subs, m, rec.ClientID, true)
			p.Sent, p.PacketID = sent, r.ids[x.QueueOffset]
			if p.QoS == 0 {
				// No subscription matches any more: it was delivered
				// at QoS 1 or 2 and is completed at the lower.
				p.QoS = min(m.QoS, 1)
			}
		} else if x.QueueOffset >= r.rp.Live {
			p = deliveryOf(subs, m, rec.ClientID, false)
		}
		if p.QoS == 0 {
			return
		}
		out = append(out, replayed{ts: x.StoreTimestamp, pos: x.CommitLogOffset, q: x.Queue, off: x.QueueOffset, p: p})
	}
	runTo := func(target map[client.MessageQueue]int64) error {
		var keep []*client.MessageExt
		for _, x := range held {
			if x.QueueOffset < target[x.Queue] {
				take(x)
			} else {
				keep = append(keep, x)
			}
		}
		held = keep
		for {
			done := true
			for q, r := range work {
				if r.next < target[q] {
					done = false
				}
			}
			if done {
				return nil
			}
			msgs, err := c.Poll(rctx)
			if err != nil {
				return err
			}
			for _, x := range msgs {
				if x.QueueOffset < target[x.Queue] {
					take(x)
				} else {
					held = append(held, x)
				}
			}
		}
	}
	livePos := func() map[client.MessageQueue]int64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		t := map[client.MessageQueue]int64{}
		for q := range work {
			t[q] = b.queues[q].next
		}
		return t
	}
	err = runTo(livePos())
	if err == nil {
		b.pause()
		paused = true
		err = runTo(livePos())
	}
	reusable = err == nil
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].ts != out[j].ts {
			return out[i].ts < out[j].ts
		}
		return out[i].pos < out[j].pos
	})
	return out, ends(), err
}

func msgsOf(rs []replayed) []mqtt.Pending {
	out := make([]mqtt.Pending, len(rs))
	for i, r := range rs {
		out[i] = r.p
	}
	return out
}

// deliveryOf is how a session with subs receives m, as the server's own
// delivery would: at the highest QoS of the matching subscriptions (each
// capped by m's; 0: not at all, or QoS 0 which is not kept offline), with
// the retain flag where a matching subscription has Retain As Published,
// and the identifiers of the matching subscriptions. A message read again
// for the session (pending) was delivered already and matches shared
// subscriptions too, whatever No Local; otherwise shared subscriptions
// are skipped (their messages went to another member of the group).
func deliveryOf(subs []subRecord, m *mqtt.Message, clientID string, pending bool) mqtt.Pending {
	p := mqtt.Pending{Msg: m}
	for _, s := range subs {
		filter := s.Filter
		if _, inner, ok := packets.ParseShared(filter); ok {
			if !pending {
				continue
			}
			filter = inner
		}
		if !pending && s.NoLocal && m.ClientID == clientID || !packets.Match(filter, m.Topic) {
			continue
		}
		p.QoS = max(p.QoS, min(s.QoS, m.QoS))
		p.Retain = p.Retain || s.RetainAsPublished && m.Retain
		p.SubIDs = mqtt.AddSubID(p.SubIDs, s.Identifier)
	}
	return p
}

// replayConsumer returns a started consumer holding qs (whose replayKey
// is key): an idle one from the last resumes, or a new one.
func (b *Backend) replayConsumer(ctx context.Context, key string, qs []client.MessageQueue) (*client.PullConsumer, error) {
	c, err := b.replays.get(ctx, key)
	if c != nil || err != nil {
		return c, err
	}
	co := client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: b.opts.Registries, Logger: b.log},
		Group:         groupReplay, From: client.ConsumeFromLast, PullSuspend: time.Second}}
	if c, err = client.NewPullConsumer(co); err != nil {
		b.replays.drop(key)
		return nil, err
	}
	if err = c.Assign(qs); err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		c.Close()
		b.replays.drop(key)
		return nil, err
	}
	return c, nil
}

// pause stops live delivery (after the batch in progress) until the
// matching unpause; pauses nest.
func (b *Backend) pause() {
	b.pauseMu.Lock()
	defer b.pauseMu.Unlock()
	b.pauses++
	if b.pauses == 1 {
		b.gate.Lock()
	}
}

func (b *Backend) unpause() {
	b.pauseMu.Lock()
	defer b.pauseMu.Unlock()
	b.pauses--
	if b.pauses == 0 {
		b.gate.Unlock()
	}
}

// waitLive waits (bounded by SendTimeout) until the live consumer has
// delivered everything the brokers stored so far on the queues of points,
// so that a resumed session gets those messages from the replay, in
// order, rather than some later from live delivery.
func (b *Backend) waitLive(ctx context.Context, points []resumePoint) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.SendTimeout)
	defer cancel()
	topics := map[string]bool{}
	for _, rp := range points {
		topics[rp.Topic] = true
	}
	target := map[client.MessageQueue]int64{}
	for t := range topics {
		stats, err := b.adm.TopicStats(ctx, t)
		if err != nil {
			b.log.Warn("bridge: offsets for a session resume", "topic", t, "err", err)
			return
		}
		for _, s := range stats {
			target[s.Queue] = s.MaxOffset
		}
	}
	for {
		behind := false
		b.mu.Lock()
		for q, off := range target {
			if qs := b.queues[q]; qs != nil && qs.next < off {
				behind = true
				break
			}
		}
		b.mu.Unlock()
		if !behind {
			return
		}
		select {
		case <-ctx.Done():
			b.log.Warn("bridge: live consumer behind at a session resume; some messages may come out of order")
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}
