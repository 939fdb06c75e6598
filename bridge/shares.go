package bridge

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Shared subscriptions across nodes. Each shared subscription
// $share/<group>/<filter> is a broker consumer group (shareGroup), in
// clustering mode, over every device-facing topic, run by the nodes that
// have members of it: the brokers split the queues among those nodes, so
// each message reaches one node, which hands it to one local member
// (mqtt.Server.DeliverShared). The live consumer delivers plain
// subscriptions only (DeliverUnshared). A node reconciles its share
// consumers with the server's shared subscriptions every
// Options.ShareRefresh.
//
// Where a group starts is decided by its brokers (START_SHARE_GROUP,
// startGroup) before the SUBACK that needs it, and the earliest start
// wins: a broker never moves the offsets another node's start or a
// connected member relies on, so two nodes whose members subscribe at the
// same moment lose nothing published after the first SUBACK.

// sharePrefix starts the consumer group names of shared subscriptions.
const sharePrefix = "MQTT_SHARE_"

// shareGroup is the consumer group of a shared subscription: the share
// name's safe characters (at most 32) and a hash of the whole
// "$share/<group>/<filter>", so distinct subscriptions never share a group.
func shareGroup(share string) string {
	g, _, _ := packets.ParseShared(share)
	var sb strings.Builder
	sb.WriteString(sharePrefix)
	for _, r := range g {
		if sb.Len() == len(sharePrefix)+32 {
			break
		}
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	h := fnv.New64a()
	h.Write([]byte(share))
	fmt.Fprintf(&sb, "_%016x", h.Sum64())
	return sb.String()
}

// shareConsumer consumes one shared subscription's group on this node.
type shareConsumer struct {
	share  string
	c      *client.PullConsumer
	cancel context.CancelFunc
	done   chan struct{}
}

// shareLoop keeps the share consumers in line with the server's shared
// subscriptions until the backend closes; then it closes them (their
// offsets are committed, their queues go to the other members).
func (b *Backend) shareLoop(srv clusterServer) {
	defer b.wg.Done()
	running := map[string]*shareConsumer{}
	// kept: each share's messages held by members, across its consumers
	// on this node (shareAcks.attach): kept while a member holds one.
	kept := map[string]*shareAcks{}
	defer func() {
		for _, sc := range running {
			sc.stop()
		}
	}()
	// The refresh ticks on the process's shared clock (internal/beat), in
	// the same wake-ups as its other periodic work.
	refresh := beat.NewTicker(b.opts.ShareRefresh)
	defer refresh.Stop()
	var gap time.Duration // the least pause between walks: 50 times the last one (~2% of a core)
	var walked time.Time  // the end of the last walk
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-refresh.C:
		case <-b.shareWake:
		}
		if wait := gap - time.Since(walked); wait > 0 {
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		began := time.Now()
		want := map[string]bool{}
		for _, s := range srv.SharedSubscriptions() {
			want[s] = true
		}
		gap = 50 * time.Since(began)
		b.mu.Lock()
		for s, m := range b.shareFrom {
			// Started without it, or unsubscribed (or refused) before
			// its consumer started. A mark comes before its subscription
			// joins the server's index (PrepareShares): one the walk did
			// not find is dropped only once it is shareMarkKeep old.
			if running[s] != nil || !want[s] && began.Sub(m.at) > shareMarkKeep {
				delete(b.shareFrom, s)
			}
		}
		b.mu.Unlock()
		b.pruneHeld(began)
		for s, sc := range running {
			if !want[s] {
				if b.testShareHook != nil {
					b.testShareHook("stop", s)
				}
				sc.stop()
				delete(running, s)
				b.setShares(running)
				b.log.Info("bridge: left shared subscription group", "share", s, "group", shareGroup(s))
			}
		}
		for s, acks := range kept {
			if running[s] == nil && acks.settle() {
				delete(kept, s)
			}
		}
		for s := range want {
			if running[s] != nil || b.ctx.Err() != nil {
				continue
			}
			if b.testShareHook != nil {
				b.testShareHook("start", s)
			}
			acks := kept[s]
			if acks == nil {
				acks = newShareAcks(srv, s)
			}
			sc, err := b.startShare(srv, s, acks)
			if err != nil {
				b.log.Warn("bridge: shared subscription consumer", "share", s, "err", err)
				continue
			}
			running[s] = sc
			kept[s] = acks
			b.setShares(running)
			b.log.Info("bridge: joined shared subscription group", "share", s, "group", shareGroup(s))
		}
		if b.testShareHook != nil {
			b.testShareHook("walked", "")
		}
		walked = time.Now()
	}
}

// wakeShares asks the share loop to reconcile soon (a subscription of a
// session changed); it never blocks.
func (b *Backend) wakeShares() {
	select {
	case b.shareWake <- struct{}{}:
	default:
	}
}

// setShares publishes the running share consumers (for Shares).
func (b *Backend) setShares(running map[string]*shareConsumer) {
	m := make(map[string]*client.PullConsumer, len(running))
	for s, sc := range running {
		m[s] = sc.c
	}
	b.mu.Lock()
	b.shares = m
	b.mu.Unlock()
}

// ShareQueues returns the queues this node consumes for the shared
// subscription share ("$share/<group>/<filter>"), nil when it has no
// member of it.
func (b *Backend) ShareQueues(share string) []client.MessageQueue {
	b.mu.Lock()
	c := b.shares[share]
	b.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Assigned()
}

// shareMarkTimeout bounds PrepareShares' offset lookups (they hold a SUBACK).
const shareMarkTimeout = 3 * time.Second

// shareMarkKeep is how long a mark whose subscription the share loop does
// not find is kept: PrepareShares takes it just before the server lists
// the subscription.
const shareMarkKeep = 10 * time.Second

// PrepareShares implements mqtt.SharePreparer: it starts, at the
// brokers, each shared subscription in filters that has no consumer on
// this node yet (startGroup), and keeps where its group starts as the
// share's mark. The server calls it before the subscriptions join its
// index and before their SUBACK, so the share loop never sees such a
// subscription without its mark, and a message published after the
// SUBACK is at or past the group's offsets; the consumer starts later. A
// failed start is logged, and the consumer starts the group when it
// starts.
//
// A shared subscription exists while some session holds it: a group
// whose brokers know it but that no session holds any more (no node runs
// its consumer, no other session's record lists it, clientID's session
// did not hold it before this SUBSCRIBE) starts again at the SUBACK like
// a new one (restart), rather than handing its next member what was
// published while it had none (shareHeld). The brokers decide each start
// in one step against the others: a restart moves no offset another
// node's start or member relies on, so two nodes whose members subscribe
// at the same moment both get what was published after the first SUBACK.
func (b *Backend) PrepareShares(ctx context.Context, clientID string, filters []string) {
	if b.isClosed() {
		return
	}
	b.mu.Lock()
	before := b.held[clientID].shares
	b.mu.Unlock()
	for _, share := range filters {
		if !packets.IsShared(share) {
			continue
		}
		if b.testShareHook != nil {
			b.testShareHook("mark", share)
		}
		b.mu.Lock()
		_, marked := b.shareFrom[share]
		running := b.shares[share] != nil
		b.mu.Unlock()
		if marked || running {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, shareMarkTimeout)
		// The session's own record cannot tell: the node's session tail
		// may have applied one written with this SUBSCRIBE already (a
		// checkpoint), so a brand-new member would count itself.
		held := slices.Contains(before, share)
		var err error
		if !held {
			held, err = b.shareHeld(mctx, share, clientID)
		}
		var from map[client.MessageQueue]int64
		if err == nil {
			from, err = b.startGroup(mctx, share, !held)
		}
		cancel()
		if err != nil {
			b.log.Warn("bridge: start offsets of a new shared subscription", "share", share, "err", err)
			continue
		}
		if !held {
			b.log.Info("bridge: shared subscription had no member; it starts at the SUBACK", "share", share, "group", shareGroup(share))
		}
		b.mu.Lock()
		if b.shareFrom == nil {
			b.shareFrom = map[string]shareMark{}
		}
		if _, ok := b.shareFrom[share]; !ok && b.shares[share] == nil {
			b.shareFrom[share] = shareMark{from: from, at: time.Now()}
		}
		b.mu.Unlock()
	}
}

// shareStarter numbers this process's group starts (startGroup).
var shareStarter atomic.Uint64

// startGroup starts share's group at the brokers (admin.StartShareGroup)
// on every device-facing topic and returns where it starts: with restart
// at the topics' ends unless another node's start or member relies on
// the group's offsets, else where it has none; the rest keep theirs.
func (b *Backend) startGroup(ctx context.Context, share string, restart bool) (map[client.MessageQueue]int64, error) {
	group := shareGroup(share)
	starter := fmt.Sprintf("%s/%d/%d", b.opts.NodeID, time.Now().UnixNano(), shareStarter.Add(1))
	from := map[client.MessageQueue]int64{}
	for _, t := range b.topics {
		offs, err := b.adm.StartShareGroup(ctx, group, t, starter, restart)
		if err != nil {
			return nil, fmt.Errorf("bridge: start %s on %s: %w", group, t, err)
		}
		maps.Copy(from, offs)
	}
	return from, nil
}

// noteSubscribed notes the shares among subs, the subscriptions of
// clientID's session after a SUBSCRIBE or UNSUBSCRIBE, as those the
// session holds (heldShares).
func (b *Backend) noteSubscribed(clientID string, subs []mqtt.Subscription) {
	var now []string
	for _, sub := range subs {
		if packets.IsShared(sub.Filter) {
			now = append(now, sub.Filter)
		}
	}
	b.mu.Lock()
	_, had := b.held[clientID]
	b.mu.Unlock()
	if had || now != nil {
		b.noteHeld(clientID, now)
	}
}

// shareMark is where a shared subscription's group starts, as its
// brokers decided before a SUBACK of this node (PrepareShares); at is
// when it was taken.
type shareMark struct {
	from map[client.MessageQueue]int64
	at   time.Time
}

// heldShares are the shared subscriptions a session of this node holds as
// of its last change the backend saw: those of the session LoadSession
// resumed (from a record or a handoff, on any node, also after a crash),
// then those of each SaveSubscriptions. A resumed session that subscribes
// to its share again, before this node runs the group's consumer (say at
// once after its CONNACK, or at another QoS), held it all along: it gets
// what was published while it was away, not a start at its SUBACK.
type heldShares struct {
	shares []string
	at     time.Time // when noted: an entry of a client with no session here is dropped heldGrace later
}

// heldGrace is how long a held-shares entry of a client that has no
// session on this node is kept: LoadSession notes it before the server
// installs the session.
const heldGrace = time.Minute

// noteHeld records shares as what clientID's session holds (none: the
// entry goes).
func (b *Backend) noteHeld(clientID string, shares []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(shares) == 0 {
		delete(b.held, clientID)
		return
	}
	b.held[clientID] = heldShares{shares: shares, at: time.Now()}
}

// pruneHeld drops the held-shares entries noted before now-heldGrace of
// clients that have no session on this node (taken over elsewhere, or
// evicted); each entry is looked at once a grace at most.
func (b *Backend) pruneHeld(now time.Time) {
	var old []string
	b.mu.Lock()
	for id, h := range b.held {
		if now.Sub(h.at) > heldGrace {
			old = append(old, id)
		}
	}
	b.mu.Unlock()
	for _, id := range old {
		here := b.instance(id) != 0
		b.mu.Lock()
		if h, ok := b.held[id]; ok && now.Sub(h.at) > heldGrace {
			if here {
				h.at = now // looked at again a grace later
				b.held[id] = h
			} else {
				delete(b.held, id)
			}
		}
		b.mu.Unlock()
	}
}

// shareHeld reports whether a session other than clientID holds share:
// a member on a node running the group's consumer, or the subscription in
// another session's record that has not expired (connected, or offline
// on a node that is gone: it gets what was published meanwhile when it
// resumes).
func (b *Backend) shareHeld(ctx context.Context, share, clientID string) (bool, error) {
	now := time.Now()
	b.mu.Lock()
	for id, rec := range b.sessions {
		if id == clientID || rec.Deleted || expiredAt(rec, now) {
			continue
		}
		for _, s := range rec.Subscriptions {
			if s.Filter == share {
				b.mu.Unlock()
				return true, nil
			}
		}
	}
	b.mu.Unlock()
	members, err := b.adm.GroupMembers(ctx, shareGroup(share))
	if err != nil {
		return false, fmt.Errorf("bridge: members of %s: %w", shareGroup(share), err)
	}
	return len(members) > 0, nil
}

// startShare starts a consumer of share's group; acks holds what local
// members hold of the share's messages (from an earlier consumer of the
// share on this node, or new).
func (b *Backend) startShare(srv clusterServer, share string, acks *shareAcks) (_ *shareConsumer, err error) {
	group := shareGroup(share)
	sctx, scancel := context.WithTimeout(b.ctx, b.opts.StartTimeout)
	defer scancel()
	b.mu.Lock()
	mark, marked := b.shareFrom[share]
	delete(b.shareFrom, share)
	b.mu.Unlock()
	defer func() {
		if err != nil && marked {
			// The next attempt starts where this one would have.
			b.mu.Lock()
			if _, ok := b.shareFrom[share]; !ok {
				b.shareFrom[share] = mark
			}
			b.mu.Unlock()
		}
	}()
	if b.testShareHook != nil {
		b.testShareHook("marked", share)
	}
	// A SUBACK of this node started the group at the brokers
	// (PrepareShares), unless that failed or its session was resumed
	// here with the subscription: the group then starts now, at the
	// topics' ends where it has no offsets (a new group: RocketMQ's rule
	// would start it at 0 on a young queue, handing the first member the
	// topics' whole history), and resumes its committed offsets elsewhere.
	// The brokers store the start, so a queue assigned later (a first
	// rebalance that failed, a member of another node that left) starts
	// there too, on this node or another. Offsets move on as members are
	// done with the messages (shareAcks), not as they are polled: a crash
	// of the node between a poll and the members' acknowledgements loses
	// none of them.
	from := mark.from // read-only
	if !marked {
		if from, err = b.startGroup(sctx, share, false); err != nil {
			return nil, err
		}
	}
	co := client.PullConsumerOptions{AutoCommit: true, ManualOffsets: true, ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: b.opts.Registries, Logger: b.log.With("component", "bridge-share")},
		Group:         group, Model: client.Clustering, From: client.ConsumeFromLast,
		PullSuspend: 2 * time.Second, PersistInterval: time.Second, RebalanceInterval: 5 * time.Second}}
	c, err := client.NewPullConsumer(co)
	if err != nil {
		return nil, err
	}
	for _, t := range b.topics {
		if err := c.Subscribe(t, "*"); err != nil {
			c.Close()
			return nil, err
		}
	}
	if b.testShareHook != nil {
		b.testShareHook("join", share)
	}
	if err := c.Start(sctx); err != nil {
		c.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(b.ctx)
	sc := &shareConsumer{share: share, c: c, cancel: cancel, done: make(chan struct{})}
	acks.attach(c)
	swept := make(chan struct{})
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		defer close(swept)
		acks.sweepLoop(ctx)
	}()
	go func() {
		defer b.wg.Done()
		defer close(sc.done)
		defer func() { <-swept }()
		for {
			msgs, err := c.Poll(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
					return
				}
				b.log.Warn("bridge: poll shared subscription", "share", share, "err", err)
				continue
			}
			for _, x := range msgs {
				if x.QueueOffset < from[x.Queue] {
					acks.skip(x.Queue, x.QueueOffset)
					continue
				}
				if !b.deliverShared(ctx, srv, share, x, acks) {
					return
				}
			}
		}
	}()
	return sc, nil
}

// sharedWait is the pause before a shared message all of whose local
// members' queues were full is offered again.
const sharedWait = 20 * time.Millisecond

// deliverShared hands x to a local member of share. While every member's
// queue is full it waits and offers it again (the group's queues on this
// node wait meanwhile: the brokers keep the rest); false when ctx ended
// first.
func (b *Backend) deliverShared(ctx context.Context, srv clusterServer, share string, x *client.MessageExt, acks *shareAcks) bool {
	m := fromBroker(x)
	if !packets.ValidTopicName(m.Topic) {
		acks.skip(x.Queue, x.QueueOffset)
		return true // the live consumer logs it
	}
	h := acks.hold(x.Queue, x.QueueOffset, m)
	if h == nil {
		return true // a member holds it already: read again
	}
	for {
		taker, full := srv.TryDeliverSharedAcked(share, m, h)
		if !full {
			acks.taken(h, taker)
			return true
		}
		if !b.sleepCtx(ctx, sharedWait) {
			return false // held: its offset is not committed
		}
	}
}

// stop ends the consumer: its poll loop, then the consumer (committing
// its offsets and leaving the group).
func (sc *shareConsumer) stop() {
	sc.cancel()
	<-sc.done
	sc.c.Close()
}

// deliverLive hands a live message to the server: plain subscriptions
// only when shared ones are balanced across nodes, and a session whose
// queue is full gets it again from the log (overflow.go).
func (b *Backend) deliverLive(d mqtt.Deliverer, srv clusterServer, m *mqtt.Message) {
	if srv != nil {
		srv.DeliverLive(m, b.overflowFn)
		return
	}
	d.Deliver(m)
}
