package bridge

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// retentionCluster is a one-broker cluster whose store keeps segments one
// minute (store.file_reserved_time's minimum); expireSys ages them.
type retentionCluster struct {
	*cluster.Cluster
	dir string
}

func startRetentionCluster(t *testing.T) *retentionCluster {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir, FileReservedTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &retentionCluster{c, dir}
}

// sysCount is the number of records topic's queues hold past their
// minimum offsets, and how many start above 0 (lost their head).
func (c *retentionCluster) sysCount(topic string) (total, headless int64) {
	st := c.Broker(0).Store()
	for q := range int32(DefaultTopicQueues) {
		lo, hi := st.MinOffset(topic, q), st.MaxOffset(topic, q)
		total += hi
		if lo > 0 {
			headless++
		}
	}
	return total, headless
}

// expireSys rolls the broker's commitlog over with filler, waits until
// topic holds copies numbering copies written after the filler, then
// deletes every segment but the active one as retention does with
// segments past file_reserved_time, and checks that topic lost records.
func (c *retentionCluster) expireSys(t *testing.T, topic string, copies int64) {
	t.Helper()
	p := newProducer(t, c.Cluster)
	body := make([]byte, 900<<10) // random: the producer compresses bodies
	rand.Read(body)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 6 {
		if _, err := p.Send(ctx, &client.Message{Topic: "FILLER", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := c.sysCount(topic)
	// A node without compaction writes none: the test then fails at what
	// the clients see, not here.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n, _ := c.sysCount(topic); n >= after+copies {
			break
		}
	}
	st := c.Broker(0).Store()
	testutil.WaitFor(t, 10*time.Second, "everything flushed and indexed", func() bool {
		s := st.Stats()
		return s.FlushLagBytes == 0 && s.DispatchLagBytes == 0 && s.IndexLagBytes == 0
	})
	segs, err := filepath.Glob(filepath.Join(c.dir, "broker-0", "commitlog", "*"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("commitlog segments %v (%v): want the filler to roll one over", segs, err)
	}
	slices.Sort(segs)
	old := time.Now().Add(-2 * time.Hour)
	for _, s := range segs[:len(segs)-1] {
		if err := os.Chtimes(s, old, old); err != nil {
			t.Fatal(err)
		}
	}
	for st.CleanExpired() > 0 {
	}
	if _, headless := c.sysCount(topic); headless == 0 {
		t.Fatalf("no queue of %s lost its head to retention", topic)
	}
}

// TestBridgeRetainedOutlivesRetention: a retained message whose original
// record the brokers' retention deleted is still served after every node
// restarted, because the node wrote it again (Options.RefreshAge); a
// retained message cleared before is not brought back by an older copy.
func TestBridgeRetainedOutlivesRetention(t *testing.T) {
	c := startRetentionCluster(t)
	mod := func(_ *mqtt.Options, o *Options) { o.RefreshAge = time.Second }
	a := startBridge(t, c.Cluster, mod)
	pub := connected(t, addrOf(a), packets.Version5, "pub")
	pub.publish1(1, &packets.Publish{Topic: "keep/r", Payload: []byte("v1"), Retain: true})
	pub.publish1(2, &packets.Publish{Topic: "keep/gone", Payload: []byte("x"), Retain: true})
	pub.publish1(3, &packets.Publish{Topic: "keep/gone", Retain: true}) // cleared
	pub.disconnect()
	c.expireSys(t, DefaultRetainedTopic, 2)
	a.Close()

	b := startBridge(t, c.Cluster, mod)
	if n, _ := b.Server().RetainedCount(); n != 1 {
		t.Fatalf("restarted node holds %d retained messages, want 1", n)
	}
	s := connected(t, addrOf(b), packets.Version5, "sub")
	s.subscribe(1, sub("keep/#", 1))
	got := s.expectPublish()
	if got.Topic != "keep/r" || string(got.Payload) != "v1" || !got.Retain {
		t.Fatalf("got %s %q retain=%v, want keep/r \"v1\" retained", got.Topic, got.Payload, got.Retain)
	}
	s.nothing(300 * time.Millisecond)
}

// TestRefreshPlan: every node given the same list picks the same owner
// for a key, exactly one of them; the owner copies a record at
// RefreshAge, the others at half as much again.
func TestRefreshPlan(t *testing.T) {
	now := time.Now()
	nodes := []string{"n3", "n1", "n2"}
	owners := map[string]int{}
	for i := range 100 {
		key := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		var owner string
		for _, self := range nodes {
			p := newRefreshPlan(self, nodes, time.Hour, now)
			if o := p.owner(key); owner == "" {
				owner = o
			} else if o != owner {
				t.Fatalf("key %s: owner %s on one node, %s on another", key, owner, o)
			}
			stored := now.Add(-time.Hour).UnixMilli()
			if got, want := p.due(key, stored), self == owner; got != want {
				t.Fatalf("key %s on %s (owner %s): due at RefreshAge = %v", key, self, owner, got)
			}
			if !p.due(key, now.Add(-90*time.Minute).UnixMilli()) || p.due(key, now.Add(-59*time.Minute).UnixMilli()) {
				t.Fatalf("key %s on %s: wrong due times", key, self)
			}
		}
		owners[owner]++
	}
	if len(owners) != 3 {
		t.Fatalf("owners %v: want the keys spread over the 3 nodes", owners)
	}
	// A node the registries do not list (yet) counts itself.
	if p := newRefreshPlan("solo", nil, time.Hour, now); p.owner("x") != "solo" {
		t.Fatal("a lone node does not own its keys")
	}
}

// TestRefreshPacer: the pacer lets n writes a second through.
func TestRefreshPacer(t *testing.T) {
	p := &pacer{n: 20}
	start := time.Now()
	for range 50 {
		if !p.wait(context.Background()) {
			t.Fatal("wait refused")
		}
	}
	if d := time.Since(start); d < 2*time.Second || d > 10*time.Second {
		t.Fatalf("50 writes at 20 a second took %v, want about 2 s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for p.wait(ctx) {
	}
}

// TestRetainedCopyOrder: a retained copy stored after a newer record of
// its topic does not take the newer state back, and makes it due for a
// copy of its own (also a delete); a copy whose original is gone sets the
// state; an older copy after that does not undo a newer one.
func TestRetainedCopyOrder(t *testing.T) {
	b := &Backend{retained: map[string]*retainedEntry{}}
	q := client.MessageQueue{Topic: DefaultRetainedTopic, BrokerName: "b", QueueID: 0}
	msg := func(v string) *mqtt.Message { return &mqtt.Message{Topic: "t", Payload: []byte(v)} }
	b.applyRetained(msg("v5"), q, 5, 5, 1)
	b.applyRetained(msg(""), q, 7, 7, 2) // cleared
	b.applyRetained(msg("v5"), q, 8, 5, 3)
	if e := b.retained["t"]; e.msg != nil || e.origin != 7 || !e.due {
		t.Fatalf("after a stale copy: %+v, want the delete, due for a copy", e)
	}
	b.applyRetained(msg(""), q, 9, 7, 4)
	if e := b.retained["t"]; e.msg != nil || e.off != 9 || e.due {
		t.Fatalf("after the delete's copy: %+v", e)
	}

	// The replay of a log whose originals 5 and 7 retention deleted.
	b.retained = map[string]*retainedEntry{}
	b.applyRetained(msg("v5"), q, 8, 5, 3)
	if e := b.retained["t"]; e.msg == nil || string(e.msg.Payload) != "v5" {
		t.Fatalf("a copy without its original: %+v", e)
	}
	b.applyRetained(msg(""), q, 9, 7, 4)
	if e := b.retained["t"]; e.msg != nil {
		t.Fatalf("the delete's copy did not win over the older state: %+v", e)
	}
	b.applyRetained(msg("v5"), q, 10, 5, 5)
	if e := b.retained["t"]; e.msg != nil {
		t.Fatalf("an older state's copy brought it back: %+v", e)
	}
}

// TestBridgeSessionOutlivesRetention: an offline persistent session whose
// records the brokers' retention deleted is still there after every node
// restarted (its subscription gets what was published meanwhile, QoS 1),
// because the node wrote its latest record again (Options.RefreshAge); a
// session ended by a clean start is not brought back.
func TestBridgeSessionOutlivesRetention(t *testing.T) {
	c := startRetentionCluster(t)
	mod := func(_ *mqtt.Options, o *Options) { o.RefreshAge = time.Second }
	a := startBridge(t, c.Cluster, mod)
	for _, id := range []string{"keep", "ended"} {
		s, _ := persistent(t, addrOf(a), id, true)
		s.subscribe(1, sub("cmd/#", 1))
		s.disconnect()
	}
	// "ended" comes back clean and leaves with its session.
	s := connected(t, addrOf(a), packets.Version5, "ended")
	s.disconnect()
	c.expireSys(t, DefaultSessionTopic, 2)
	a.Close()

	b := startBridge(t, c.Cluster, mod)
	pub := connected(t, addrOf(b), packets.Version5, "pub")
	pub.publish1(1, &packets.Publish{Topic: "cmd/x", Payload: []byte("while away")})
	keep, ack := persistent(t, addrOf(b), "keep", false)
	if !ack.SessionPresent {
		t.Fatal("the restarted node lost the offline session")
	}
	if got := keep.expectPublish(); got.Topic != "cmd/x" || string(got.Payload) != "while away" || got.QoS != 1 {
		t.Fatalf("resumed session got %s %q QoS %d", got.Topic, got.Payload, got.QoS)
	}
	if _, ack := persistent(t, addrOf(b), "ended", false); ack.SessionPresent {
		t.Fatal("a session ended by a clean start came back")
	}
}

// TestSessionCopyOrder: a session record copy stored after a newer
// record of its client changes nothing on a node that read the newer one
// and makes that state due for a copy of its own; after a delete, the
// delete itself is due (a copy of a delete), so that a replay that lost
// both originals ends at the delete; a copy of the current state only
// moves its copy time on.
func TestSessionCopyOrder(t *testing.T) {
	b := &Backend{sessions: map[string]*sessionRecord{}, copies: newSessionCopies()}
	q := client.MessageQueue{Topic: DefaultSessionTopic, BrokerName: "b", QueueID: 1}
	rec := func(off int64, origin int64, deleted bool) *sessionRecord {
		r := &sessionRecord{ClientID: "c", Node: "n1", ExpiryMs: 3_600_000, Deleted: deleted, q: q, off: off, stored: off}
		if origin >= 0 {
			r.RefreshOf = &origin
		}
		return r
	}
	// apply is what the tail does with a record: a copy that changes no
	// state is taken by applySessionCopyLocked, anything else applied.
	apply := func(r *sessionRecord) {
		if r.RefreshOf != nil && b.applySessionCopyLocked(r) {
			return
		}
		prev := b.sessions[r.ClientID]
		b.applySessionLocked(r, true)
		b.copies.noteLocked(prev, b.sessions[r.ClientID], r, r.stored)
	}
	apply(rec(5, -1, false))
	apply(rec(6, 5, false))
	if b.copies.at["c"] != 6 || b.sessions["c"].off != 5 {
		t.Fatalf("a copy of the current state: at %d, record at %d", b.copies.at["c"], b.sessions["c"].off)
	}
	apply(rec(7, -1, true)) // the session ends
	apply(rec(8, 5, false)) // a copy written before the end was read
	if b.sessions["c"] != nil || !b.copies.gone["c"].due || b.copies.gone["c"].off != 7 {
		t.Fatalf("a stale copy after the delete: session %+v, gone %+v", b.sessions["c"], b.copies.gone["c"])
	}

	// The replay of a log whose records 5 to 7 retention deleted: the
	// stale copy sets the old state, the delete's copy ends it, and an
	// older copy after that does not bring it back.
	b = &Backend{sessions: map[string]*sessionRecord{}, copies: newSessionCopies()}
	apply(rec(8, 5, false))
	if b.sessions["c"] == nil {
		t.Fatal("a copy whose original is gone did not set the state")
	}
	apply(rec(9, 7, true))
	apply(rec(10, 5, false))
	if b.sessions["c"] != nil {
		t.Fatalf("after the delete's copy: %+v", b.sessions["c"])
	}

	// A newer record (a connect elsewhere) before a stale copy.
	b = &Backend{sessions: map[string]*sessionRecord{}, copies: newSessionCopies()}
	apply(rec(5, -1, false))
	conn := rec(6, -1, false)
	conn.Connect = true
	apply(conn)
	apply(rec(7, 5, false))
	if b.sessions["c"] != conn || !b.copies.due["c"] {
		t.Fatalf("a stale copy after a connect: current %+v, due %v", b.sessions["c"], b.copies.due["c"])
	}
}

// TestBridgeConnectedSessionOutlivesRetention: a persistent session that
// stays connected and idle longer than the brokers' retention keeps a
// record inside it (its node checkpoints it again once its record is
// Options.RefreshAge old), so when its node crashes after retention
// deleted the session's first records, the client resumes it on another
// node with its subscription.
func TestBridgeConnectedSessionOutlivesRetention(t *testing.T) {
	c := startRetentionCluster(t)
	mod := func(mo *mqtt.Options, o *Options) {
		shortHandoff(mo, o)
		o.RefreshAge, o.CheckpointInterval = time.Second, 100*time.Millisecond
	}
	a := startBridge(t, c.Cluster, mod)
	s, _ := persistent(t, addrOf(a), "idle", true)
	s.subscribe(1, sub("cmd/#", 1))
	c.expireSys(t, DefaultSessionTopic, 2)
	crash(t, a)

	b := startBridge(t, c.Cluster, mod)
	pub := connected(t, addrOf(b), packets.Version5, "pub")
	pub.publish1(1, &packets.Publish{Topic: "cmd/x", Payload: []byte("after the crash")})
	again, ack := persistent(t, addrOf(b), "idle", false)
	if !ack.SessionPresent {
		t.Fatal("the connected session was lost with its node")
	}
	if got := again.expectPublish(); got.Topic != "cmd/x" || string(got.Payload) != "after the crash" {
		t.Fatalf("resumed session got %s %q", got.Topic, got.Payload)
	}
}
