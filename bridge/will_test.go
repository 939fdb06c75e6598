package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// quickLooks makes a node look at the registries' node list often and
// claim a gone node's will after a short grace, so that a crashed node's
// wills go out soon. The grace only matters for a live node that looks
// gone (it revokes the claim within it): the tests that fake one set
// Backend.testClaimGrace long instead.
func quickLooks(mo *mqtt.Options, bo *Options) {
	shortHandoff(mo, bo)
	bo.HeartbeatInterval = 200 * time.Millisecond
	bo.WillClaimGrace = time.Second
}

// namedLooks is quickLooks for a node with the fixed id id.
func namedLooks(id string) func(*mqtt.Options, *Options) {
	return func(mo *mqtt.Options, bo *Options) { quickLooks(mo, bo); bo.NodeID = id }
}

// willConnect connects a v5 client with a will to will/<id> (delay in
// seconds; expiry 0: a session that ends with its connection).
func willConnect(t *testing.T, addr, id string, clean bool, expiry, delay uint32) *rawClient {
	t.Helper()
	return willConnectSaying(t, addr, id, clean, expiry, delay, "offline "+id)
}

// willConnectSaying is willConnect with the will's payload.
func willConnectSaying(t *testing.T, addr, id string, clean bool, expiry, delay uint32, payload string) *rawClient {
	t.Helper()
	r := dialRaw(t, addr, packets.Version5)
	cp := &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60, WillFlag: true, WillQoS: 1,
		WillTopic: "will/" + id, WillPayload: []byte(payload)}
	if expiry > 0 {
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = expiry
	}
	if delay > 0 {
		cp.WillProperties.Present.Add(packets.PropWillDelay)
		cp.WillProperties.WillDelay = delay
	}
	r.connect(cp)
	return r
}

// willStored waits until node n's copy of the session topic owes a will
// of id (the node that holds id stored it).
func willStored(t *testing.T, n *Bridge, id string) {
	t.Helper()
	testutil.WaitFor(t, 60*time.Second, "a stored will of "+id, func() bool { return owed(n, id) > 0 })
}

// owed is the number of wills of id that node n's copy of the session
// topic owes.
func owed(n *Bridge, id string) int {
	n.Backend().mu.Lock()
	defer n.Backend().mu.Unlock()
	return len(n.Backend().wills.owed[id])
}

// willsOn returns a reader of the default ingress topic (where wills go),
// from its start: it collects "MQTT_TOPIC=body" of each message until it
// has want of them (at most 30 s), then for extra more.
func willsOn(t *testing.T, c *cluster.Cluster) func(want int, extra time.Duration) []string {
	pc := newPull(t, c, DefaultOptions().DefaultTopic)
	return func(want int, extra time.Duration) []string {
		var out []string
		deadline := time.Now().Add(60 * time.Second)
		for done := false; ; {
			if !done && len(out) >= want {
				done, deadline = true, time.Now().Add(extra)
			}
			left := time.Until(deadline)
			if left <= 0 {
				return out
			}
			ctx, cancel := context.WithTimeout(context.Background(), left)
			msgs, _ := pc.Poll(ctx)
			cancel()
			for _, m := range msgs {
				out = append(out, m.Property(PropTopic)+"="+string(m.Body))
			}
		}
	}
}

// willNodes starts a cluster, two bridge nodes and a reader of the wills.
func willNodes(t *testing.T) (a, b *Bridge, wills func(int, time.Duration) []string) {
	c := startCluster(t)
	a = startBridge(t, c, quickLooks)
	b = startBridge(t, c, quickLooks)
	return a, b, willsOn(t, c)
}

// TestBridgeWillOfCrashedNode: a client connected with a will (no delay)
// to a node that crashes gets its will published once, by the surviving
// node; a client that disconnected normally before the crash gets none.
func TestBridgeWillOfCrashedNode(t *testing.T) {
	a, b, wills := willNodes(t)

	willConnect(t, addrOf(a), "w-clean", true, 0, 0)
	willConnect(t, addrOf(a), "w-persist", true, 3600, 0)
	gone := willConnect(t, addrOf(a), "w-gone", true, 0, 0)
	willStored(t, b, "w-clean")
	willStored(t, b, "w-persist")
	willStored(t, b, "w-gone")
	gone.disconnect()
	// The node settles the will of a client that left normally (a
	// will-done marker): the crash comes after that.
	testutil.WaitFor(t, 60*time.Second, "w-gone's will settled", func() bool { return owed(b, "w-gone") == 0 })
	crash(t, a)

	got := wills(2, time.Second)
	want := map[string]int{"will/w-clean=offline w-clean": 1, "will/w-persist=offline w-persist": 1}
	count := map[string]int{}
	for _, w := range got {
		count[w]++
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("wills published after the crash: %v, want %v", count, want)
	}
}

// TestBridgeWillCancelledByResume: a delayed will of a client whose node
// crashed is not published when the client resumes its session on
// another node within the delay; without the resume it is, once the
// delay has passed.
func TestBridgeWillCancelledByResume(t *testing.T) {
	a, b, wills := willNodes(t)

	willConnect(t, addrOf(a), "w-back", false, 3600, 4)
	willConnect(t, addrOf(a), "w-late", false, 3600, 4)
	willStored(t, b, "w-back")
	willStored(t, b, "w-late")
	crash(t, a)
	back, ack := persistent(t, addrOf(b), "w-back", false)
	if !ack.SessionPresent {
		t.Fatal("session lost with the node")
	}
	defer back.disconnect()

	got := wills(1, 1500*time.Millisecond)
	if len(got) != 1 || got[0] != "will/w-late=offline w-late" {
		t.Fatalf("wills published: %v, want only w-late's", got)
	}
}

// owedDue reports whether node n's copy of the session topic owes a will
// of id whose delay was running when it was stored (an offline record).
func owedDue(n *Bridge, id string) bool {
	n.Backend().mu.Lock()
	defer n.Backend().mu.Unlock()
	for _, e := range n.Backend().wills.owed[id] {
		if e.w.DueAtMs > 0 {
			return true
		}
	}
	return false
}

// TestBridgeDelayedWillOfCrashedNode: a will whose delay was running on
// a node (its client's connection ended) when the node crashed is
// published once when it is due, by the surviving node; one that the
// node published itself before the crash is not published again.
func TestBridgeDelayedWillOfCrashedNode(t *testing.T) {
	a, b, wills := willNodes(t)
	once := willConnect(t, addrOf(a), "w-once", false, 3600, 1)
	later := willConnect(t, addrOf(a), "w-later", false, 3600, 6)
	willStored(t, b, "w-once")
	willStored(t, b, "w-later")
	once.nc.Close()
	later.nc.Close()
	testutil.WaitFor(t, 30*time.Second, "w-later's running will delay stored", func() bool { return owedDue(b, "w-later") })
	// w-once's will goes out from node A, which then settles it.
	testutil.WaitFor(t, 30*time.Second, "w-once's will settled", func() bool { return owed(b, "w-once") == 0 })
	crash(t, a)
	got := wills(2, 1500*time.Millisecond)
	slices.Sort(got)
	if want := "will/w-later=offline w-later,will/w-once=offline w-once"; strings.Join(got, ",") != want {
		t.Fatalf("wills published: %v, want %s", got, want)
	}
}

// TestBridgeWillOfEarlierProcess: a node restarted under the same node
// id after a crash publishes the wills of its earlier process's clients
// (no delay) before it accepts connections, once.
func TestBridgeWillOfEarlierProcess(t *testing.T) {
	c := startCluster(t)
	fixed := func(mo *mqtt.Options, bo *Options) { quickLooks(mo, bo); bo.NodeID = "will-node" }
	a := startBridge(t, c, fixed)
	wills := willsOn(t, c)
	willConnect(t, addrOf(a), "w-restart", false, 3600, 0)
	willStored(t, a, "w-restart")
	crash(t, a)
	a2 := startBridge(t, c, fixed)
	// Reconnecting at once does not cancel a will without delay.
	dev, ack := persistent(t, addrOf(a2), "w-restart", false)
	if !ack.SessionPresent {
		t.Fatal("session lost with the process")
	}
	defer dev.disconnect()
	got := wills(1, time.Second)
	if len(got) != 1 || got[0] != "will/w-restart=offline w-restart" {
		t.Fatalf("wills published: %v, want w-restart's once", got)
	}
}

// TestBridgeWillRecordBytes pins a record carrying a will, a will-done
// marker, a claim, a revoke and a will-owed marker (doc.go); records
// without them decode as before.
func TestBridgeWillRecordBytes(t *testing.T) {
	w := &willRecord{ID: "0a1b-1", pendingRecord: pendingRecord{Topic: "will/d", Payload: []byte("bye"), QoS: 1, Retain: true,
		ContentType: "text/plain", ClientID: "d"}, Username: "u", DelayMs: 5000, SessionMs: 3600000}
	for _, c := range []struct {
		rec  *sessionRecord
		want string
	}{
		{&sessionRecord{ClientID: "d", Node: "n", Online: true, ExpiryMs: 3600000, Will: w},
			`{"clientId":"d","node":"n","online":true,"expiryMs":3600000,"will":{"wid":"0a1b-1","topic":"will/d",` +
				`"payload":"Ynll","qos":1,"retain":true,"contentType":"text/plain","clientId":"d","username":"u",` +
				`"delayMs":5000,"sessionMs":3600000}}`},
		{&sessionRecord{ClientID: "d", Node: "n", ExpiryMs: 3600000, DisconnectedAt: 1763800000000,
			Will: &willRecord{ID: "0a1b-2", pendingRecord: pendingRecord{Topic: "will/d", QoS: 0}, DelayMs: 5000,
				SessionMs: 3600000, DueAtMs: 1763800005000}},
			`{"clientId":"d","node":"n","expiryMs":3600000,"disconnectedAtMs":1763800000000,"will":{"wid":"0a1b-2",` +
				`"topic":"will/d","qos":0,"delayMs":5000,"sessionMs":3600000,"dueAtMs":1763800005000}}`},
		{&sessionRecord{ClientID: "d", Node: "n", WillDone: "0a1b-1", Claim: "77ff", ClaimPrev: "m/66ee"},
			`{"clientId":"d","node":"n","expiryMs":0,"willDone":"0a1b-1","claim":"77ff","claimPrev":"m/66ee"}`},
		{&sessionRecord{ClientID: "d", Node: "n", WillDone: "0a1b-1"},
			`{"clientId":"d","node":"n","expiryMs":0,"willDone":"0a1b-1"}`},
		{&sessionRecord{ClientID: "d", Node: "n", WillDone: "0a1b-1", Revoke: "m/77ff"},
			`{"clientId":"d","node":"n","expiryMs":0,"willDone":"0a1b-1","revoke":"m/77ff"}`},
		{&sessionRecord{ClientID: "d", Node: "n", WillDone: "0a1b-3", Owe: true, Will: &willRecord{ID: "0a1b-3",
			pendingRecord: pendingRecord{Topic: "will/d", QoS: 1}, DueAtMs: 1763800001000, Retry: true}},
			`{"clientId":"d","node":"n","expiryMs":0,"will":{"wid":"0a1b-3","topic":"will/d","qos":1,` +
				`"dueAtMs":1763800001000,"retry":true},"willDone":"0a1b-3","owe":true}`},
	} {
		b, err := json.Marshal(c.rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("record\n got %s\nwant %s", b, c.want)
		}
		back, err := decodeSessionRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); string(again) != c.want {
			t.Errorf("round trip %s", again)
		}
	}
	old, err := decodeSessionRecord([]byte(`{"clientId":"d","node":"n","online":true,"expiryMs":0}`))
	if err != nil || old.Will != nil || old.WillDone != "" {
		t.Fatalf("old record: %+v %v", old, err)
	}
	m := w.message()
	if m.Topic != "will/d" || string(m.Payload) != "bye" || m.QoS != 1 || !m.Retain || m.ClientID != "d" || m.Username != "u" ||
		m.ContentType != "text/plain" {
		t.Fatalf("will message %+v", m)
	}
	if (&willRecord{DelayMs: 5000, SessionMs: 0}).wait() != 0 {
		t.Fatal("a session that ends with its connection publishes its will at once")
	}
}

// TestBridgeWillClaimedByDeadProcess: a node restarted under the same
// node id claims its earlier process's will and dies before publishing
// it (a fault hook stops it there); the next process publishes the will,
// once. Before claims, the first restart's will-done marker settled the
// will and nobody published it.
func TestBridgeWillClaimedByDeadProcess(t *testing.T) {
	c := startCluster(t)
	fixed := func(mo *mqtt.Options, bo *Options) { quickLooks(mo, bo); bo.NodeID = "will-claim" }
	a := startBridge(t, c, fixed)
	wills := willsOn(t, c)
	willConnect(t, addrOf(a), "w-claim", false, 3600, 0)
	willStored(t, a, "w-claim")
	crash(t, a)
	claimed := make(chan struct{}, 1)
	a2 := startBridgeWith(t, c, fixed, func(b *Bridge) {
		b.Backend().testWillHook = func(id string) bool {
			if id != "w-claim" {
				return true
			}
			select {
			case claimed <- struct{}{}:
			default:
			}
			return false
		}
	})
	select {
	case <-claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("the restarted node did not claim the will")
	}
	crash(t, a2)
	startBridge(t, c, fixed)
	got := wills(1, time.Second)
	if len(got) != 1 || got[0] != "will/w-claim=offline w-claim" {
		t.Fatalf("wills published: %v, want w-claim's once", got)
	}
}

// crashWithClaimers starts three nodes (ids prefix-3, prefix-1 with the
// fault hooks of pre, prefix-2) and a reader of the wills, connects
// client with a will to the first, and crashes that node once both
// others stored the will: prefix-1 (first) claims it, last remains.
func crashWithClaimers(t *testing.T, prefix, client string, pre func(*Bridge)) (first, last *Bridge, wills func(int, time.Duration) []string) {
	c := startCluster(t)
	a := startBridge(t, c, namedLooks(prefix+"-3"))
	first = startBridgeWith(t, c, namedLooks(prefix+"-1"), pre)
	last = startBridge(t, c, namedLooks(prefix+"-2"))
	wills = willsOn(t, c)
	willConnect(t, addrOf(a), client, true, 0, 0)
	willStored(t, first, client)
	willStored(t, last, client)
	crash(t, a)
	return first, last, wills
}

// TestBridgeWillClaimerCrashes: the node that claims the will of a
// crashed node's client crashes too before publishing it (a fault hook
// stops it there); the last node sees both gone and publishes the will,
// once.
func TestBridgeWillClaimerCrashes(t *testing.T) {
	claimed := make(chan struct{}, 1)
	b, _, wills := crashWithClaimers(t, "wc", "w-claimer", func(b *Bridge) {
		b.Backend().testWillHook = func(id string) bool {
			if id != "w-claimer" {
				return true
			}
			select {
			case claimed <- struct{}{}:
			default:
			}
			return false
		}
	})
	select {
	case <-claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("the node with the smallest id did not claim the will")
	}
	crash(t, b)
	got := wills(1, time.Second)
	if len(got) != 1 || got[0] != "will/w-claimer=offline w-claimer" {
		t.Fatalf("wills published: %v, want w-claimer's once", got)
	}
}

// TestBridgeWillPublisherDiesBeforeItsMarker pins the contract's one
// duplicate (doc.go, "Wills"): the node that publishes a crashed node's
// will dies after the publish and before its will-done marker is stored
// (a fault hook drops the marker); the last node claims the will again
// and publishes it: the will goes out twice, not more, and is settled.
func TestBridgeWillPublisherDiesBeforeItsMarker(t *testing.T) {
	var published atomic.Bool
	b, last, wills := crashWithClaimers(t, "wd", "w-twice", func(b *Bridge) {
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.ClientID != "w-twice" || rec.Claim != "" || rec.Revoke != "" || rec.Owe {
				return send()
			}
			published.Store(true)
			return errors.New("node dying (test)")
		}
	})
	testutil.WaitFor(t, 30*time.Second, "the will published by the node with the smallest id", published.Load)
	crash(t, b)
	testutil.WaitFor(t, 30*time.Second, "the will settled", func() bool { return owed(last, "w-twice") == 0 })
	got := wills(2, 2*time.Second)
	if len(got) != 2 || got[0] != "will/w-twice=offline w-twice" || got[1] != got[0] {
		t.Fatalf("wills published: %v, want w-twice's twice", got)
	}
}

// TestBridgeWillClaimerCrashesNodeRestarts: the client's node crashes,
// the other node claims the will and crashes before publishing it (a
// fault hook stops it there), then the client's node comes back (the
// same id): it sees its will's claimer gone and publishes the will, once.
func TestBridgeWillClaimerCrashesNodeRestarts(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, namedLooks("wr-2"))
	claimed := make(chan struct{}, 1)
	b := startBridgeWith(t, c, namedLooks("wr-1"), func(b *Bridge) {
		b.Backend().testWillHook = func(id string) bool {
			if id != "w-back" {
				return true
			}
			select {
			case claimed <- struct{}{}:
			default:
			}
			return false
		}
	})
	wills := willsOn(t, c)
	willConnect(t, addrOf(a), "w-back", true, 0, 0)
	willStored(t, b, "w-back")
	crash(t, a)
	select {
	case <-claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("the other node did not claim the will")
	}
	crash(t, b)
	startBridge(t, c, namedLooks("wr-2"))
	got := wills(1, time.Second)
	if len(got) != 1 || got[0] != "will/w-back=offline w-back" {
		t.Fatalf("wills published: %v, want w-back's once", got)
	}
}

// TestBridgeWillClaimStoredTwice: the claim of the node that publishes a
// crashed node's will is stored twice (a write reported failed but
// stored, then retried; a fault hook sends it twice): the will is
// published once. Before, the second copy, losing to the first, dropped
// this process's own claim while it published, so its will-done marker
// was never written and the will went out again on the next claim.
func TestBridgeWillClaimStoredTwice(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, quickLooks)
	b := startBridgeWith(t, c, quickLooks, func(b *Bridge) {
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.ClientID != "w-dup" || rec.Claim == "" {
				return send()
			}
			if err := send(); err != nil {
				return err
			}
			return send()
		}
	})
	wills := willsOn(t, c)
	willConnect(t, addrOf(a), "w-dup", true, 0, 0)
	willStored(t, b, "w-dup")
	crash(t, a)
	testutil.WaitFor(t, 30*time.Second, "w-dup's will settled", func() bool { return owed(b, "w-dup") == 0 })
	got := wills(1, 3*time.Second)
	if len(got) != 1 || got[0] != "will/w-dup=offline w-dup" {
		t.Fatalf("wills published: %v, want w-dup's once", got)
	}
}

// TestBridgeWillPublishFailed: a node whose publish of a will fails
// (a fault hook) keeps the will stored and owed, and tries it again:
// one that goes out on a later try is published once and settled; ones
// that never go out (their session ended with the connection, or stays)
// are published once by the other node after this one crashes. Before,
// the session's delete or offline save settled a will whose publish
// had failed, and nobody published it.
func TestBridgeWillPublishFailed(t *testing.T) {
	c := startCluster(t)
	var mu sync.Mutex
	tries := map[string]int{}
	a := startBridgeWith(t, c, quickLooks, func(b *Bridge) {
		b.Backend().testPublishHook = func(m *mqtt.Message) error {
			mu.Lock()
			defer mu.Unlock()
			tries[m.ClientID]++
			if m.ClientID == "wf-later" && tries[m.ClientID] > 2 {
				return nil
			}
			return errors.New("store unavailable (test)")
		}
	})
	b := startBridge(t, c, quickLooks)
	wills := willsOn(t, c)
	triedTwice := func(id string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return tries[id] >= 2 }
	}
	var conns []*rawClient
	for _, cl := range []struct {
		id     string
		expiry uint32
	}{{"wf-ends", 0}, {"wf-stays", 600}, {"wf-later", 0}} {
		conns = append(conns, willConnect(t, addrOf(a), cl.id, true, cl.expiry, 0))
		willStored(t, b, cl.id)
	}
	for _, r := range conns {
		r.nc.Close()
	}
	// A second try comes after the session's records were written.
	testutil.WaitFor(t, 30*time.Second, "wf-ends tried again", triedTwice("wf-ends"))
	testutil.WaitFor(t, 30*time.Second, "wf-stays tried again", triedTwice("wf-stays"))
	testutil.WaitFor(t, 30*time.Second, "wf-later's will settled", func() bool { return owed(b, "wf-later") == 0 })
	if owed(b, "wf-ends") == 0 || owed(b, "wf-stays") == 0 {
		t.Fatalf("wills whose publish failed settled: owed wf-ends %d, wf-stays %d", owed(b, "wf-ends"), owed(b, "wf-stays"))
	}
	crash(t, a)
	got := wills(3, 2*time.Second)
	slices.Sort(got)
	if want := "will/wf-ends=offline wf-ends,will/wf-later=offline wf-later,will/wf-stays=offline wf-stays"; strings.Join(got, ",") != want {
		t.Fatalf("wills published: %v, want %s", got, want)
	}
}

// TestBridgeWillOfNodeThatLooksGone: a node the registries stop listing
// (a fault hook hides it from the other node's looks) while it lives
// and its client stays connected revokes the other node's claim on the
// client's will: the will is not published while the client is
// connected, and once its connection ends abnormally it is published
// once, by its own node. Before, the other node published it while the
// client was still connected.
func TestBridgeWillOfNodeThatLooksGone(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, namedLooks("lg-2"))
	claimed := make(chan struct{}, 1)
	b := startBridgeWith(t, c, namedLooks("lg-1"), func(b *Bridge) {
		b.Backend().testClaimGrace = 30 * time.Second
		b.Backend().testNodesHook = func(nodes []string) []string {
			return slices.DeleteFunc(nodes, func(n string) bool { return n == "lg-2" })
		}
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.Claim != "" && rec.ClientID == "w-alive" {
				select {
				case claimed <- struct{}{}:
				default:
				}
			}
			return send()
		}
	})
	wills := willsOn(t, c)
	dev := willConnect(t, addrOf(a), "w-alive", true, 0, 0)
	willStored(t, b, "w-alive")
	select {
	case <-claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("the other node did not claim the will")
	}
	// The claimer waits (30 s here, so that a revoke late under load
	// does not race it) before it publishes; the revoke voids its claim,
	// and the claimer, hearing the node, does not claim the will again.
	testutil.WaitFor(t, 30*time.Second, "the claim revoked", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		list := b.Backend().wills.owed["w-alive"]
		return len(list) == 1 && list[0].claim == "" && b.Backend().wills.fire[list[0].w.ID] == nil
	})
	if got := wills(0, 3*time.Second); len(got) != 0 {
		t.Fatalf("wills published while the client is connected: %v", got)
	}
	dev.nc.Close()
	got := wills(1, 2*time.Second)
	if len(got) != 1 || got[0] != "will/w-alive=offline w-alive" {
		t.Fatalf("wills published: %v, want w-alive's once", got)
	}
}

// TestBridgeWillRevokeWriteFailsOnce: the first write of a live node's
// revoke of another node's claim on its client's will fails (a fault
// hook): it is written again, the claim is revoked and the will is not
// published while the client is connected. Before, the node gave up
// after one failed write and the claimer published the will once its
// grace was over.
func TestBridgeWillRevokeWriteFailsOnce(t *testing.T) {
	c := startCluster(t)
	var failed atomic.Bool
	a := startBridgeWith(t, c, namedLooks("rf-2"), func(b *Bridge) {
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.Revoke != "" && failed.CompareAndSwap(false, true) {
				return errors.New("store unavailable (test)")
			}
			return send()
		}
	})
	b := startBridgeWith(t, c, namedLooks("rf-1"), func(b *Bridge) {
		b.Backend().testClaimGrace = time.Minute
		b.Backend().testNodesHook = func(nodes []string) []string {
			return slices.DeleteFunc(nodes, func(n string) bool { return n == "rf-2" })
		}
	})
	wills := willsOn(t, c)
	dev := willConnect(t, addrOf(a), "w-rf", true, 0, 0)
	willStored(t, b, "w-rf")
	testutil.WaitFor(t, 30*time.Second, "the claim revoked after a failed write", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		_, heard := b.Backend().wills.heard["rf-2"]
		return failed.Load() && heard
	})
	dev.nc.Close()
	got := wills(1, 2*time.Second)
	if len(got) != 1 || got[0] != "will/w-rf=offline w-rf" {
		t.Fatalf("wills published: %v, want w-rf's once", got)
	}
}

// untilApplied waits, in a fault hook of bk, until cond (called with
// bk.mu held) holds after a record bk's tail applied, or bk closes.
func untilApplied(bk *Backend, cond func() bool) {
	for {
		ch := bk.applied.Wait()
		bk.mu.Lock()
		ok := cond()
		bk.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-bk.ctx.Done():
			return
		}
	}
}

// TestBridgeWillRevokedBeforeItsPublisherRuns: the goroutine that is to
// publish a claimed will of a node that looks gone runs only after that
// node, alive, revoked the claim (a fault hook holds it back; under load
// the scheduler can too): it does not publish the live client's will,
// which goes out once, from its own node, when its connection ends.
// Before, that goroutine found its claim gone, took that for "no grace
// to wait" and published the will at once: the cause of
// TestBridgeWillOfNodeThatLooksGone's failure in CI.
func TestBridgeWillRevokedBeforeItsPublisherRuns(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, namedLooks("rv-2"))
	var ran atomic.Bool
	var tried atomic.Int32
	b := startBridgeWith(t, c, namedLooks("rv-1"), func(b *Bridge) {
		bk := b.Backend()
		bk.testClaimGrace = time.Minute
		bk.testNodesHook = func(nodes []string) []string {
			return slices.DeleteFunc(nodes, func(n string) bool { return n == "rv-2" })
		}
		bk.testFiringHook = func(clientID string) {
			untilApplied(bk, func() bool {
				list := bk.wills.owed[clientID]
				return len(list) == 1 && list[0].claim == "" // revoked
			})
			ran.Store(true)
		}
		bk.testWillHook = func(string) bool { tried.Add(1); return true }
	})
	wills := willsOn(t, c)
	dev := willConnect(t, addrOf(a), "w-rv", true, 0, 0)
	willStored(t, b, "w-rv")
	testutil.WaitFor(t, 30*time.Second, "the claim held, revoked, and its publisher run", ran.Load)
	dev.nc.Close()
	got := wills(1, 2*time.Second)
	if len(got) != 1 || got[0] != "will/w-rv=offline w-rv" {
		t.Fatalf("wills published: %v, want w-rv's once", got)
	}
	if n := tried.Load(); n != 0 {
		t.Fatalf("the claimer went on to publish the will of a live client %d times after its claim was revoked", n)
	}
}

// TestBridgeWillNotClaimedAgainAfterRevoke: a node's revoke of a claim
// on its client's will that the claimer applies while it looks at the
// registries (fault hooks: the revoke waits for that look, the look for
// the revoke) makes the node alive at once for the claimer, whose next
// pass does not claim the will again. Before, that pass still used the
// look's "gone" and claimed it again at once: one more claim for the
// node to revoke, and one more grace to race.
func TestBridgeWillNotClaimedAgainAfterRevoke(t *testing.T) {
	c := startCluster(t)
	looking := make(chan struct{})
	var lookingOnce sync.Once
	a := startBridgeWith(t, c, namedLooks("rc-2"), func(b *Bridge) {
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.Revoke != "" {
				select {
				case <-looking:
				case <-time.After(30 * time.Second):
				}
			}
			return send()
		}
	})
	var claims, looksAfter atomic.Int32
	startBridgeWith(t, c, namedLooks("rc-1"), func(b *Bridge) {
		bk := b.Backend()
		bk.testClaimGrace = time.Minute
		bk.testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.Claim != "" && rec.ClientID == "w-rc" {
				claims.Add(1)
			}
			return send()
		}
		bk.testNodesHook = func(nodes []string) []string {
			nodes = slices.DeleteFunc(nodes, func(n string) bool { return n == "rc-2" })
			if claims.Load() == 0 {
				return nodes
			}
			looksAfter.Add(1)
			lookingOnce.Do(func() {
				close(looking)
				// This look returns once the revoke is applied.
				untilApplied(bk, func() bool { _, heard := bk.wills.heard["rc-2"]; return heard })
			})
			return nodes
		}
	})
	willConnect(t, addrOf(a), "w-rc", true, 0, 0)
	// The second look after the claim: the pass between the two ran.
	testutil.WaitFor(t, 60*time.Second, "two looks after the claim", func() bool { return looksAfter.Load() >= 2 })
	if n := claims.Load(); n != 1 {
		t.Fatalf("%d claims on the will of a live client, want 1 (revoked)", n)
	}
}

// failingWillNodes starts a cluster, a node a whose publishes of id's
// will fail (a fault hook), a node b and a reader of the wills; tried is
// how many times a tried the will.
func failingWillNodes(t *testing.T, id string) (a, b *Bridge, wills func(int, time.Duration) []string, tried func() int32) {
	c := startCluster(t)
	var tries atomic.Int32
	a = startBridgeWith(t, c, quickLooks, func(b *Bridge) {
		b.Backend().testPublishHook = func(m *mqtt.Message) error {
			if m.ClientID != id || m.Topic != "will/"+id {
				return nil
			}
			tries.Add(1)
			return errors.New("store unavailable (test)")
		}
	})
	b = startBridge(t, c, quickLooks)
	return a, b, willsOn(t, c), tries.Load
}

// owedSaying reports whether node n's copy of the session topic owes a
// will of id with the payload p.
func owedSaying(n *Bridge, id, p string) bool {
	n.Backend().mu.Lock()
	defer n.Backend().mu.Unlock()
	return slices.ContainsFunc(n.Backend().wills.owed[id], func(e owedWill) bool { return string(e.w.Payload) == p })
}

// TestBridgeWillOwedOverReconnect: a client whose will's publish failed
// (a fault hook) reconnects to the same node with another will while the
// node still tries the first; the node crashes: both wills go out once,
// from the other node. Before, the new connection's records settled the
// owed will and the crash lost it.
func TestBridgeWillOwedOverReconnect(t *testing.T) {
	a, b, wills, tried := failingWillNodes(t, "wo")
	first := willConnectSaying(t, addrOf(a), "wo", true, 0, 0, "first")
	testutil.WaitFor(t, 60*time.Second, "the first will stored", func() bool { return owedSaying(b, "wo", "first") })
	first.nc.Close()
	// A second try comes after the session's delete was written.
	testutil.WaitFor(t, 30*time.Second, "the first will tried again", func() bool { return tried() >= 2 })
	willConnectSaying(t, addrOf(a), "wo", true, 0, 0, "second")
	testutil.WaitFor(t, 60*time.Second, "the second will stored", func() bool { return owedSaying(b, "wo", "second") })
	crash(t, a)
	if got := strings.Join(slices.Sorted(slices.Values(wills(2, 2*time.Second))), ","); got != "will/wo=first,will/wo=second" {
		t.Fatalf("wills published: %s, want wo's first and second once each", got)
	}
}

// TestBridgeWillOwedOverTakeover: a client's session is taken over by
// another node (it resumes there); its old connection's will, published
// by the takeover, fails (a fault hook) and stays owed on the old node,
// which crashes: the will goes out once, from the other node. Before,
// the old node's handoff record settled it and the crash lost it.
func TestBridgeWillOwedOverTakeover(t *testing.T) {
	a, b, wills, tried := failingWillNodes(t, "wt")
	willConnect(t, addrOf(a), "wt", false, 600, 0)
	willStored(t, b, "wt")
	r := dialRaw(t, addrOf(b), packets.Version5)
	cp := &packets.Connect{ClientID: "wt", KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 600
	r.connect(cp)
	// A second try comes after the handoff was written.
	testutil.WaitFor(t, 30*time.Second, "the will tried again", func() bool { return tried() >= 2 })
	crash(t, a)
	got := wills(1, 2*time.Second)
	if len(got) != 1 || got[0] != "will/wt=offline wt" {
		t.Fatalf("wills published: %v, want wt's once", got)
	}
}

// TestBridgeUnstorableWillOfCrashedNode: the will of a crashed node's
// client that the broker can never store (its topic holds 0x01) is
// settled by the node that claims it, once: not claimed again and again.
// Before, each failed publish dropped the claim and the will loop claimed
// it again, a claim record every few seconds for as long as both ran.
func TestBridgeUnstorableWillOfCrashedNode(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, quickLooks)
	var claims atomic.Int32
	b := startBridgeWith(t, c, quickLooks, func(b *Bridge) {
		b.Backend().testMarkerHook = func(rec *sessionRecord, send func() error) error {
			if rec.Claim != "" && rec.ClientID == "w-unstorable" {
				claims.Add(1)
			}
			return send()
		}
	})
	r := dialRaw(t, addrOf(a), packets.Version5)
	r.connect(&packets.Connect{ClientID: "w-unstorable", CleanStart: true, KeepAlive: 60, WillFlag: true, WillQoS: 1,
		WillTopic: "will/\x01", WillPayload: []byte("offline")})
	willStored(t, b, "w-unstorable")
	crash(t, a)
	testutil.WaitFor(t, 30*time.Second, "the unstorable will settled", func() bool { return owed(b, "w-unstorable") == 0 })
	if n := claims.Load(); n != 1 {
		t.Fatalf("%d claims on the will, want 1", n)
	}
}

// TestBridgeWillRevokeStoredInGraceAppliedLate: a revoke the will's node
// stored within the claimer's grace stops the claimer from publishing
// even when the claimer's tail applies it only after the grace ended (a
// fault hook holds the tail back until a second after): the claimer
// reads the session topic up to its end before it publishes. It went on
// to publish the live client's will.
func TestBridgeWillRevokeStoredInGraceAppliedLate(t *testing.T) {
	// The revoke must be stored within the grace: long, as under load
	// it may be late; the claimer's read to the end of the session
	// topic may then wait past the tail's hold.
	const grace = 8 * time.Second
	c := startCluster(t)
	a := startBridge(t, c, namedLooks("rl-2"))
	firing := make(chan time.Time, 1)
	var published atomic.Bool
	logs := &testutil.LogBuffer{}
	b := startBridgeWith(t, c, func(mo *mqtt.Options, bo *Options) {
		namedLooks("rl-1")(mo, bo)
		bo.SendTimeout = 30 * time.Second
		bo.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}, func(b *Bridge) {
		b.Backend().testClaimGrace = grace
		b.Backend().testNodesHook = func(nodes []string) []string {
			return slices.DeleteFunc(nodes, func(n string) bool { return n == "rl-2" })
		}
		b.Backend().testFiringHook = func(clientID string) {
			if clientID == "w-late" {
				select {
				case firing <- time.Now():
				default:
				}
			}
		}
		b.Backend().testBeforeApply = func(rec *sessionRecord) {
			if rec.Revoke == "" || rec.ClientID != "w-late" {
				return
			}
			select {
			case start := <-firing:
				time.Sleep(time.Until(start.Add(grace + time.Second)))
			case <-time.After(30 * time.Second):
			}
		}
		b.Backend().testWillHook = func(clientID string) bool {
			published.Store(true)
			return false // not published after all: the test only notes it
		}
	})
	dev := willConnect(t, addrOf(a), "w-late", true, 0, 0)
	defer dev.nc.Close()
	willStored(t, b, "w-late")
	testutil.WaitFor(t, 60*time.Second, "the claimer's decision", func() bool {
		return published.Load() || strings.Contains(logs.String(), "will not published: its node revoked the claim")
	})
	if published.Load() {
		t.Fatal("the claimer went on to publish the will of a live client whose node revoked the claim within the grace")
	}
}
