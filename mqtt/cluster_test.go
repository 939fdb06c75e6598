package mqtt

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestServerClusterEvict: Evict ends a v5 connection with DISCONNECT 0x8E
// and a 3.1.1 one by closing it, returns the session's state, removes the
// session without telling the backend, and publishes a will without delay;
// it leaves alone a session other than the instance it names.
func TestServerClusterEvict(t *testing.T) {
	s := startServer(t, nil)
	watcher := connected(t, s.addr, packets.Version5, "watcher")
	watcher.subscribe(1, sub("will/#", 0))

	r := dialRaw(t, s.addr, packets.Version5)
	cp := &packets.Connect{ClientID: "ev5", CleanStart: true, KeepAlive: 60, WillFlag: true, WillTopic: "will/ev5",
		WillPayload: []byte("gone")}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 600
	r.connect(cp)
	r.subscribe(1, sub("a/#", 1))
	inst := s.SessionInstance("ev5")
	if !s.Connected("ev5") || inst == 0 {
		t.Fatal("ev5 not connected")
	}
	if _, ok := s.Evict("ev5", inst+1, EvictMoved); ok || !s.Connected("ev5") {
		t.Fatal("Evict of another session instance removed the session")
	}
	st, ok := s.Evict("ev5", inst, EvictMoved)
	if !ok || len(st.Subscriptions) != 1 || st.Subscriptions[0].Filter != "a/#" || st.Expiry != 600*time.Second {
		t.Fatalf("evicted state %+v %v", st, ok)
	}
	if code := r.closed(); code != int(packets.ReasonSessionTakenOver) {
		t.Fatalf("DISCONNECT code %d, want 0x8E", code)
	}
	if s.Connected("ev5") || s.SessionInstance("ev5") != 0 {
		t.Fatal("session still on the server")
	}
	if pub := watcher.expectPublish(); pub.Topic != "will/ev5" {
		t.Fatalf("will %s", pub.Topic)
	}
	if _, ok, _ := s.backend.LoadSession(context.Background(), "ev5"); ok {
		t.Fatal("Evict saved the session to the backend")
	}
	if _, ok := s.Evict("ev5", inst, EvictMoved); ok {
		t.Fatal("second Evict found a session")
	}

	r3 := connected(t, s.addr, packets.Version311, "ev3")
	if _, ok := s.Evict("ev3", s.SessionInstance("ev3"), EvictEnded); !ok {
		t.Fatal("ev3 not evicted")
	}
	if code := r3.closed(); code != -1 {
		t.Fatalf("3.1.1 client got DISCONNECT %d", code)
	}
}

// TestServerClusterSharedDelivery: DeliverUnshared skips shared
// subscriptions, DeliverShared reaches one member of the named shared
// subscription only, SharedSubscriptions lists them.
func TestServerClusterSharedDelivery(t *testing.T) {
	s := startServer(t, nil)
	plain := connected(t, s.addr, packets.Version5, "plain")
	plain.subscribe(1, sub("jobs/#", 0))
	m1 := connected(t, s.addr, packets.Version5, "m1")
	m1.subscribe(1, sub("$share/g/jobs/#", 0))
	m2 := connected(t, s.addr, packets.Version5, "m2")
	m2.subscribe(1, sub("$share/g/jobs/#", 0), sub("$share/h/jobs/+", 0))
	if got := s.SharedSubscriptions(); !slices.Equal(got, []string{"$share/g/jobs/#", "$share/h/jobs/+"}) {
		t.Fatalf("shared subscriptions %v", got)
	}
	s.DeliverUnshared(&Message{Topic: "jobs/1", Payload: []byte("p")})
	if pub := plain.expectPublish(); string(pub.Payload) != "p" {
		t.Fatalf("plain got %q", pub.Payload)
	}
	m1.nothing(100 * time.Millisecond)
	m2.nothing(100 * time.Millisecond)

	if s.DeliverShared("$share/g/other/#", &Message{Topic: "jobs/1"}) {
		t.Fatal("delivered to an unknown shared subscription")
	}
	if s.DeliverShared("$share/g/jobs/#", &Message{Topic: "other/1"}) {
		t.Fatal("delivered a message the filter does not match")
	}
	for i := range 4 {
		if !s.DeliverShared("$share/g/jobs/#", &Message{Topic: "jobs/x", Payload: []byte{byte('0' + i)}}) {
			t.Fatal("not delivered")
		}
	}
	a, b := len(m1.collect(200*time.Millisecond)), len(m2.collect(200*time.Millisecond))
	if a != 2 || b != 2 {
		t.Fatalf("round robin: m1 %d, m2 %d", a, b)
	}
	plain.nothing(100 * time.Millisecond)
}

// collect reads PUBLISHes until none came for quiet.
func (r *rawClient) collect(quiet time.Duration) []*packets.Publish {
	var out []*packets.Publish
	for {
		p, err := r.next(quiet)
		if err != nil {
			return out
		}
		if pub, ok := p.(*packets.Publish); ok {
			out = append(out, pub)
		}
	}
}

// BenchmarkServerSharedSubscriptions: one SharedSubscriptions call (what
// the bridge runs every ShareRefresh) on a tree of 100,000 per-device
// subscriptions (cmd/<id>/#) and 10 shared ones; the baseline iterates a
// map of as many entries.
func BenchmarkServerSharedSubscriptions(b *testing.B) {
	const n = 100_000
	opts := DefaultOptions()
	s, err := NewServer(opts, NewMemoryBackend())
	if err != nil {
		b.Fatal(err)
	}
	flat := make(map[string]*Subscription, n)
	for i := range n {
		id := "dev" + strconv.Itoa(i)
		sub := &Subscription{Filter: "cmd/" + id + "/#", QoS: 1}
		s.subs.add(s.newSession(id), sub)
		flat[id] = sub
	}
	for i := range 10 {
		s.subs.add(s.newSession("w"+strconv.Itoa(i)), &Subscription{Filter: "$share/g" + strconv.Itoa(i) + "/jobs/#"})
	}
	b.Run("baseline-map-iteration", func(b *testing.B) {
		b.ReportAllocs()
		k := 0
		for b.Loop() {
			for _, sub := range flat {
				if sub.QoS == 1 {
					k++
				}
			}
		}
		if k != b.N*n {
			b.Fatalf("visited %d", k)
		}
	})
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got := s.SharedSubscriptions(); len(got) != 10 {
				b.Fatalf("got %d shared subscriptions", len(got))
			}
		}
	})
}

// releaseCounter is a Releaser that counts what it is told.
type releaseCounter struct{ recycled, released atomic.Int32 }

func (r *releaseCounter) Recycle(*Message)  { r.recycled.Add(1) }
func (r *releaseCounter) Released(*Message) { r.released.Add(1) }

// TestServerClusterEvictReleases: Evict tells the Releaser of a message
// its client did not acknowledge that the session discarded it, unless
// the session goes on elsewhere with the returned state (EvictMoved with
// an expiry); the state holds the message either way.
func TestServerClusterEvictReleases(t *testing.T) {
	s := startServer(t, nil)
	for _, tc := range []struct {
		how     Eviction
		expiry  uint32
		release bool
	}{
		{EvictMoved, 600, false},
		{EvictMoved, 0, true},
		{EvictSuperseded, 600, true},
		{EvictEnded, 600, true},
	} {
		id := fmt.Sprintf("rel-%d-%d", tc.how, tc.expiry)
		r := dialRaw(t, s.addr, packets.Version5)
		cp := &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60}
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = tc.expiry
		r.connect(cp)
		var rc releaseCounter
		if err := s.SendToRecycled(id, &Message{Topic: "x/" + id, QoS: 1, Payload: []byte("p")}, &rc); err != nil {
			t.Fatal(err)
		}
		if p, ok := r.recv().(*packets.Publish); !ok || p.Topic != "x/"+id {
			t.Fatalf("%s: got %+v", id, p)
		} // not acknowledged
		st, ok := s.Evict(id, s.SessionInstance(id), tc.how)
		if !ok || len(st.Pending) != 1 {
			t.Fatalf("%s: evicted %v, state %+v", id, ok, st)
		}
		if got := rc.released.Load() == 1; got != tc.release || rc.recycled.Load() != 0 {
			t.Fatalf("%s: released %d, recycled %d; want released %v", id, rc.released.Load(), rc.recycled.Load(), tc.release)
		}
		r.closed()
	}
}
