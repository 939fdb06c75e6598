package bridge

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// slowSub is a paho (MQTT 5) subscriber with Receive Maximum 20 whose
// handler holds every message until release is closed, then records it.
type slowSub struct {
	pc      *paho.Client
	nc      net.Conn
	release chan struct{}
	mu      sync.Mutex
	got     []int // payload sequence numbers in arrival order
	seen    map[int]bool
	gotAll  chan struct{}
	more    chan struct{} // a new sequence number arrived (buffer 1)
	want    int
}

// dialSlowSub connects id to addr and subscribes it to filter at QoS 1
// with a clean start; with filter "" it resumes id's session instead.
func dialSlowSub(t *testing.T, addr, id, filter string, want int, expiry uint32) *slowSub {
	t.Helper()
	s := &slowSub{release: make(chan struct{}), seen: map[int]bool{}, gotAll: make(chan struct{}), more: make(chan struct{}, 1), want: want}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.nc = nc
	s.pc = paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) {
				<-s.release
				n, err := strconv.Atoi(string(pr.Packet.Payload))
				if err != nil {
					t.Errorf("payload %q", pr.Packet.Payload)
					return true, nil
				}
				s.mu.Lock()
				s.got = append(s.got, n)
				if !s.seen[n] {
					s.seen[n] = true
					if len(s.seen) == s.want {
						close(s.gotAll)
					}
					select {
					case s.more <- struct{}{}:
					default:
					}
				}
				s.mu.Unlock()
				return true, nil
			}}})
	rm := uint16(20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cp := &paho.Connect{ClientID: id, CleanStart: filter != "", KeepAlive: 120,
		Properties: &paho.ConnectProperties{ReceiveMaximum: &rm}}
	if expiry > 0 {
		cp.Properties.SessionExpiryInterval = &expiry
	}
	if ack, err := s.pc.Connect(ctx, cp); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect: %v %+v", err, ack)
	}
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.pc.Disconnect(&paho.Disconnect{})
	})
	if filter == "" {
		return s // resumes a session
	}
	if _, err := s.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// stallWait is how long one publish may wait for its PUBACK, and how long
// check waits for the next new message, before the test fails. The
// tests bound each step, not the whole sequence: thousands of QoS 1
// round trips under -race took 21 s at load 39, and over 60 s (the
// sequence's old budget) at load 30 beside two other -race packages.
const stallWait = 60 * time.Second

// publishSeq publishes 0..n-1 at QoS 1 on topic from one paho client,
// as fast as the server acknowledges; at is called before message
// atIndex.
func publishSeq(t *testing.T, addr, id, topic string, n, atIndex int, at func()) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc})
	ctx, cancel := context.WithTimeout(context.Background(), stallWait)
	defer cancel()
	if ack, err := pc.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 60}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect: %v %+v", err, ack)
	}
	defer pc.Disconnect(&paho.Disconnect{})
	for i := range n {
		if i == atIndex {
			at()
		}
		pctx, pcancel := context.WithTimeout(context.Background(), stallWait)
		_, err := pc.Publish(pctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(strconv.Itoa(i))})
		pcancel()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

// check waits for every sequence number, failing when none new arrived
// for stallWait, and, with ordered, requires the first arrival of each
// to be in order (redeliveries with DUP may repeat earlier ones).
func (s *slowSub) check(t *testing.T, ordered bool) {
	t.Helper()
	stall := time.NewTimer(stallWait)
	defer stall.Stop()
	for done := false; !done; {
		select {
		case <-s.gotAll:
			done = true
		case <-s.more:
			stall.Reset(stallWait)
		case <-stall.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			missing := 0
			for i := range s.want {
				if !s.seen[i] {
					missing++
				}
			}
			t.Fatalf("%d of %d messages never arrived, none new for %v (%d deliveries)", missing, s.want, stallWait, len(s.got))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := map[int]bool{}
	last := -1
	for _, n := range s.got {
		if first[n] {
			continue
		}
		first[n] = true
		if ordered && n < last {
			t.Fatalf("message %d arrived after %d", n, last)
		}
		last = n
	}
}

// TestBridgeSlowSubscriberOverflow: a live subscriber with Receive
// Maximum 20 that does not acknowledge while a publisher stores 3,000
// QoS 1 messages: its session queue (limit 100 here) fills, the rest is
// read back from the log as it drains, and every message arrives, in
// order. Before, everything past the queue limit was dropped.
func TestBridgeSlowSubscriberOverflow(t *testing.T) {
	c := startCluster(t)
	for _, tc := range []struct {
		name      string
		expiry    uint32
		releaseAt int // the subscriber starts reading before this message
	}{{"clean", 0, 3000}, {"persistent", 3600, 3000}, {"catch-up-while-publishing", 0, 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			testSlowSubscriber(t, c, tc.name, tc.expiry, tc.releaseAt)
		})
	}
}

func testSlowSubscriber(t *testing.T, c *cluster.Cluster, name string, expiry uint32, releaseAt int) {
	const n = 3000
	b := startBridge(t, c, func(mo *mqtt.Options, bo *Options) { mo.MaxQueuedMessages = 100 })
	id := "slow-" + name
	s := dialSlowSub(t, addrOf(b), id, "t/#", n, expiry)
	release := func() {
		if b.Server().Stats().Overflows.Load() == 0 {
			t.Fatal("the subscriber's queue never overflowed: the test proves nothing")
		}
		close(s.release)
	}
	publishSeq(t, addrOf(b), id+"-pub", "t/"+name, n, releaseAt, release)
	if releaseAt >= n {
		release()
	}
	s.check(t, true)
	if d := b.Server().Stats().Dropped.Load(); d != 0 {
		t.Fatalf("%d messages dropped", d)
	}
}

// TestBridgeSlowSharedMember: the only member of a shared subscription
// does not acknowledge while 1,000 QoS 1 messages are stored; its queue
// (limit 100) fills and the share consumer waits for room instead of
// dropping the rest (before, everything past the limit was lost).
func TestBridgeSlowSharedMember(t *testing.T) {
	const n = 1000
	c := startCluster(t)
	b := startBridge(t, c, func(mo *mqtt.Options, bo *Options) {
		mo.MaxQueuedMessages = 100
		bo.ShareRefresh = 100 * time.Millisecond
	})
	s := dialSlowSub(t, addrOf(b), "slow-member", "$share/g/s/#", n, 0)
	waitShareSettled(t, "$share/g/s/#", 4*len(b.Backend().Topics()), b)
	publishSeq(t, addrOf(b), "shared-pub", "s/x", n, -1, nil)
	close(s.release)
	s.check(t, false)
	if d := b.Server().Stats().Dropped.Load(); d != 0 {
		t.Fatalf("%d messages dropped", d)
	}
}

// TestBridgeOverflowedSessionMoves: a persistent session whose queue
// overflowed (limit 100, nothing acknowledged) loses its connection and
// resumes on another node: the record written when it went offline
// resumes from what its node still owed it, so all 1,000 messages
// arrive there.
func TestBridgeOverflowedSessionMoves(t *testing.T) {
	const n = 1000
	c := startCluster(t)
	mod := func(mo *mqtt.Options, bo *Options) {
		mo.MaxQueuedMessages = 100
		bo.MaxOfflineMessages = 10 * n
	}
	a := startBridge(t, c, mod)
	b := startBridge(t, c, mod)
	s := dialSlowSub(t, addrOf(a), "mover", "t/#", n, 3600)
	publishSeq(t, addrOf(a), "mover-pub", "t/m", n, -1, nil)
	if a.Server().Stats().Overflows.Load() == 0 {
		t.Fatal("the subscriber's queue never overflowed: the test proves nothing")
	}
	s.nc.Close()
	testutil.WaitFor(t, 10*time.Second, "session offline on node A", func() bool { return !a.Server().Connected("mover") })
	r := dialSlowSub(t, addrOf(b), "mover", "", n, 3600)
	close(r.release)
	r.check(t, true)
}
