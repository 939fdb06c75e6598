package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreMQTTCrudAndNotifications runs through a front that
// reaches the broker over remoting (a separate bridge process) and through
// one that calls it in process (`smartgo standalone`), answering on the
// MQTT poller; with sync flush the in-process broker's mutations wait for
// the group commit, on a goroutine of the front's.
func TestStateStoreMQTTCrudAndNotifications(t *testing.T) {
	for _, tc := range []struct {
		name             string
		syncFlush, local bool
	}{{"remote", false, false}, {"local", false, true}, {"local sync flush", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			crudAndNotifications(t, tc.syncFlush, tc.local)
		})
	}
}

func crudAndNotifications(t *testing.T, syncFlush, local bool) {
	e := startEnvWith(t, syncFlush, local)
	ctx := ctx10(t)
	w := e.dial(t, "watcher")
	c := e.dial(t, "writer")
	if err := w.KeyNotify(ctx, []byte("k1"), false); err != nil {
		t.Fatal(err)
	}
	applied, v1, err := c.Set(ctx, []byte("k1"), []byte("v1"), sscli.SetOptions{})
	if err != nil || !applied || v1.IsZero() {
		t.Fatalf("set: %v %v %v", applied, v1, err)
	}
	next := func() sscli.Notification {
		t.Helper()
		select {
		case n := <-w.Notifications():
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("no notification")
		}
		return sscli.Notification{}
	}
	if n := next(); n.Op != statestore.OpSet || string(n.Key) != "k1" || string(n.Value) != "v1" || n.Version.Compare(v1) != 0 {
		t.Fatalf("set notification %+v (version %v)", n, v1)
	}
	val, ver, ok, err := c.Get(ctx, []byte("k1"))
	if err != nil || !ok || string(val) != "v1" || ver.Compare(v1) != 0 {
		t.Fatalf("get: %q %v %v %v", val, ver, ok, err)
	}
	if applied, _, err := c.Set(ctx, []byte("k1"), []byte("v2"), sscli.SetOptions{Cond: statestore.CondNX}); err != nil || applied {
		t.Fatalf("set nx on existing key applied=%v err=%v", applied, err)
	}
	if n, err := c.Del(ctx, []byte("k1"), statestore.HLC{}); err != nil || n != 1 {
		t.Fatalf("del: %d %v", n, err)
	}
	if n := next(); n.Op != statestore.OpDelete || string(n.Key) != "k1" {
		t.Fatalf("delete notification %+v", n)
	}
	if _, ver, ok, err := c.Get(ctx, []byte("k1")); err != nil || ok || !ver.IsZero() {
		t.Fatalf("get after del: %v %v %v", ver, ok, err)
	}
	// Expiry produces DELETE, pushed by the broker's expiry timer.
	if err := w.KeyNotify(ctx, []byte("e1"), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Set(ctx, []byte("e1"), []byte("x"), sscli.SetOptions{Expiry: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if n := next(); n.Op != statestore.OpSet || string(n.Key) != "e1" {
		t.Fatalf("notification %+v", n)
	}
	if n := next(); n.Op != statestore.OpDelete || string(n.Key) != "e1" {
		t.Fatalf("expiry notification %+v", n)
	}
	// Registrations leave with the client.
	watches := func() int {
		n := 0
		for i := 0; i < e.ss.Shards(); i++ {
			n += e.ss.Engine(i).Stats().Watches
		}
		return n
	}
	if watches() != 2 {
		t.Fatalf("watches %d, want 2", watches())
	}
	_ = w.Close()
	testutil.WaitFor(t, 5*time.Second, "registrations dropped on disconnect", func() bool { return watches() == 0 })
}

// TestStateStoreMQTTLockAndFencing is the two-client lease scenario: A
// holds the lock and writes with its token; B waits for the lease to run
// out, takes the lock with a newer token and writes; A's late write with
// the old token is rejected.
func TestStateStoreMQTTLockAndFencing(t *testing.T) {
	e := startEnv(t, true)
	ctx := ctx10(t)
	a := e.dial(t, "client-a")
	b := e.dial(t, "client-b")
	lockKey, res := []byte("lock"), []byte("resource")

	la, err := a.Acquire(ctx, lockKey, []byte("A"), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := a.Set(ctx, res, []byte("from A"), sscli.SetOptions{FencingToken: la.Token}); err != nil || !ok {
		t.Fatalf("A write: %v %v", ok, err)
	}
	if _, err := b.Acquire(ctx, lockKey, []byte("B"), time.Second); !errors.Is(err, sscli.ErrNotLocked) {
		t.Fatalf("B acquired a held lock: %v", err)
	}
	// Unfenced writes to the protected key are refused.
	if _, _, err := b.Set(ctx, res, []byte("sneaky"), sscli.SetOptions{}); !errors.Is(err, statestore.ErrFencingRequired) {
		t.Fatalf("unfenced write: %v", err)
	}
	var lb *sscli.Lock
	testutil.WaitFor(t, 5*time.Second, "B acquires after A's lease expires", func() bool {
		lb, err = b.Acquire(ctx, lockKey, []byte("B"), 5*time.Second)
		return err == nil
	})
	if lb.Token.Compare(la.Token) <= 0 {
		t.Fatalf("B's token %v not newer than A's %v", lb.Token, la.Token)
	}
	if ok, _, err := b.Set(ctx, res, []byte("from B"), sscli.SetOptions{FencingToken: lb.Token}); err != nil || !ok {
		t.Fatalf("B write: %v %v", ok, err)
	}
	if _, _, err := a.Set(ctx, res, []byte("late A"), sscli.SetOptions{FencingToken: la.Token}); !errors.Is(err, statestore.ErrFencingStale) {
		t.Fatalf("A's stale write: %v", err)
	}
	if err := la.Release(ctx); !errors.Is(err, sscli.ErrNotLocked) {
		t.Fatalf("A released B's lock: %v", err)
	}
	if v, _, _, _ := a.Get(ctx, res); string(v) != "from B" {
		t.Fatalf("resource %q", v)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, lockKey, []byte("A"), time.Second); err != nil {
		t.Fatalf("A re-acquires after release: %v", err)
	}
}

// rawClient is a paho client publishing hand-made requests.
func rawClient(t *testing.T, addr, id string) (*paho.Client, chan *paho.Publish) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *paho.Publish, 16)
	pc := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			got <- pr.Packet
			return true, nil
		}}})
	if _, err := pc.Connect(ctx10(t), &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
	return pc, got
}

func TestStateStoreMQTTEnvelopeErrors(t *testing.T) {
	e := startEnv(t, false)
	ctx := ctx10(t)
	pc, got := rawClient(t, e.addr, "raw")
	resp := "clients/raw/services/statestore/_any_/command/invoke/response"
	corr := bytes.Repeat([]byte{7}, 16)
	exp := uint32(10)
	get := statestore.AppendRequest(nil, []byte("GET"), []byte("k"))
	publish := func(p *paho.PublishProperties) *paho.PublishResponse {
		t.Helper()
		r, err := pc.Publish(ctx, &paho.Publish{Topic: statestore.RequestTopic, QoS: 1, Payload: get, Properties: p})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	recv := func() *paho.Publish {
		t.Helper()
		select {
		case p := <-got:
			return p
		case <-time.After(5 * time.Second):
			t.Fatal("no response")
		}
		return nil
	}
	// Unsupported protocol version: 505, not executed.
	publish(&paho.PublishProperties{ResponseTopic: resp, CorrelationData: corr, MessageExpiry: &exp,
		User: paho.UserProperties{{Key: "__protVer", Value: "2.0"}}})
	p := recv()
	if p.Topic != resp || !bytes.Equal(p.Properties.CorrelationData, corr) || p.Properties.User.Get("__stat") != "505" ||
		p.Properties.User.Get("__supProtMajVer") != "1" || p.Properties.User.Get("__requestProtVer") != "2.0" {
		t.Fatalf("505 response %+v %+v", p, p.Properties)
	}
	// Missing correlation data: 400 naming the property.
	publish(&paho.PublishProperties{ResponseTopic: resp, MessageExpiry: &exp})
	if p := recv(); p.Properties.User.Get("__stat") != "400" || p.Properties.User.Get("__propName") != "Correlation Data" {
		t.Fatalf("400 response %+v", p.Properties)
	}
	// A good request: 200, exact content type, correlation echoed.
	publish(&paho.PublishProperties{ResponseTopic: resp, CorrelationData: corr, MessageExpiry: &exp})
	p = recv()
	if p.Properties.User.Get("__stat") != "200" || p.Properties.ContentType != statestore.ContentType ||
		!bytes.Equal(p.Properties.CorrelationData, corr) || string(p.Payload) != "$-1\r\n" || p.Properties.User.Get("__ts") != "" {
		t.Fatalf("200 response %+v %q", p.Properties, p.Payload)
	}
}

// TestStateStoreMQTTForbiddenResponseTopicDisconnects: a request whose
// response topic is forbidden (the request topic, or under the notify
// prefix) gets the client disconnected with DISCONNECT 0x87 and is not
// executed.
func TestStateStoreMQTTForbiddenResponseTopicDisconnects(t *testing.T) {
	e := startEnv(t, false)
	corr := bytes.Repeat([]byte{7}, 16)
	exp := uint32(10)
	set := statestore.AppendRequest(nil, []byte("SET"), []byte("forbidden"), []byte("v"))
	ts := statestore.HLC{Wall: time.Now().UnixMilli(), Node: "bad"}.String()
	for i, topic := range []string{statestore.RequestTopic, "clients/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/x"} {
		nc, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		gone := make(chan *paho.Disconnect, 1)
		id := fmt.Sprintf("bad%d", i)
		pc := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc,
			OnServerDisconnect: func(d *paho.Disconnect) { gone <- d }})
		if _, err := pc.Connect(ctx10(t), &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := pc.Publish(ctx, &paho.Publish{Topic: statestore.RequestTopic, QoS: 1, Payload: set,
			Properties: &paho.PublishProperties{ResponseTopic: topic, CorrelationData: corr, MessageExpiry: &exp,
				User: paho.UserProperties{{Key: "__ts", Value: ts}}}})
		cancel()
		if err == nil {
			t.Fatalf("%s: forbidden response topic acknowledged: %+v", topic, r)
		}
		select {
		case d := <-gone:
			if d.ReasonCode != 0x87 {
				t.Fatalf("%s: DISCONNECT reason %#x, want 0x87", topic, d.ReasonCode)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: client not disconnected", topic)
		}
	}
	c := e.dial(t, "good")
	if v, _, ok, err := c.Get(ctx10(t), []byte("forbidden")); err != nil || ok {
		t.Fatalf("forbidden request executed: %q %v", v, err)
	}
}

// TestStateStoreMQTTRedeliveryDedup sends the same SET NX twice with one
// correlation id (a QoS 1 redelivery): the second gets the cached +OK.
func TestStateStoreMQTTRedeliveryDedup(t *testing.T) {
	e := startEnv(t, false)
	ctx := ctx10(t)
	pc, got := rawClient(t, e.addr, "dup")
	resp := "clients/dup/services/statestore/_any_/command/invoke/response"
	corr := bytes.Repeat([]byte{9}, 16)
	exp := uint32(10)
	set := statestore.AppendRequest(nil, []byte("SET"), []byte("once"), []byte("v"), []byte("NX"))
	ts := statestore.HLC{Wall: time.Now().UnixMilli(), Node: "dup"}.String()
	for i := 0; i < 2; i++ {
		if _, err := pc.Publish(ctx, &paho.Publish{Topic: statestore.RequestTopic, QoS: 1, Payload: set,
			Properties: &paho.PublishProperties{ResponseTopic: resp, CorrelationData: corr, MessageExpiry: &exp,
				User: paho.UserProperties{{Key: "__ts", Value: ts}}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if string(p.Payload) != "+OK\r\n" {
				t.Fatalf("attempt %d: %q", i, p.Payload)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no response")
		}
	}
}

// TestStateStoreMQTTPrefixWatch uses the SmartGo extension KEYNOTIFY
// <prefix> PREFIX, which the front fans out to every shard.
func TestStateStoreMQTTPrefixWatch(t *testing.T) {
	e := startEnv(t, false)
	ctx := ctx10(t)
	w := e.dial(t, "pw")
	c := e.dial(t, "pc")
	if _, err := w.Do(ctx, statestore.HLC{}, []byte("KEYNOTIFY"), []byte("p/"), []byte("PREFIX")); err != nil {
		t.Fatal(err)
	}
	shards := map[int]bool{}
	want := map[string]bool{}
	for i := 0; len(shards) < 2; i++ {
		k := "p/" + string(rune('a'+i))
		shards[statestore.ShardOf([]byte(k), testShards)] = true
		want[k] = true
		if _, _, err := c.Set(ctx, []byte(k), []byte("v"), sscli.SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Set(ctx, []byte("q/x"), []byte("v"), sscli.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	for len(want) > 0 {
		select {
		case n := <-w.Notifications():
			if !want[string(n.Key)] {
				t.Fatalf("unexpected notification %+v", n)
			}
			delete(want, string(n.Key))
		case <-time.After(5 * time.Second):
			t.Fatalf("missing notifications for %v", want)
		}
	}
	r, err := w.Do(ctx, statestore.HLC{}, []byte("KEYNOTIFY"), []byte("p/"), []byte("PREFIX"), []byte("STOP"))
	if err != nil || string(r.Value.Str) != "OK" {
		t.Fatalf("stop: %+v %v", r, err)
	}
	r, err = w.Do(ctx, statestore.HLC{}, []byte("KEYNOTIFY"), []byte("p/"), []byte("PREFIX"), []byte("STOP"))
	if err != nil || r.Value.Kind != statestore.KindInteger || r.Value.Int != 0 {
		t.Fatalf("second stop: %+v %v", r, err)
	}
}

// TestStateStoreMQTTLocalAndRemoteFronts serves one broker through two
// fronts, one calling its state store in process and one over remoting: a
// watcher on either front gets the notifications of changes made through
// the other, and of expiries; both read the same versions.
func TestStateStoreMQTTLocalAndRemoteFronts(t *testing.T) {
	e := startEnvWith(t, false, true)
	_, _, remoteAddr := e.startFront(t, false)
	ctx := ctx10(t)
	wl, wr := dialAt(t, e.addr, "w-local"), dialAt(t, remoteAddr, "w-remote")
	cl, cr := dialAt(t, e.addr, "c-local"), dialAt(t, remoteAddr, "c-remote")
	for _, w := range []*sscli.Client{wl, wr} {
		for _, k := range []string{"k", "e"} {
			if err := w.KeyNotify(ctx, []byte(k), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	expect := func(key string, op statestore.Op, val string) {
		t.Helper()
		for name, w := range map[string]*sscli.Client{"local": wl, "remote": wr} {
			select {
			case n := <-w.Notifications():
				if string(n.Key) != key || n.Op != op || (op == statestore.OpSet && string(n.Value) != val) {
					t.Fatalf("%s watcher: %s %q=%q, want %s %q=%q", name, n.Op, n.Key, n.Value, op, key, val)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s watcher: no %s notification for %q", name, op, key)
			}
		}
	}
	if _, _, err := cr.Set(ctx, []byte("k"), []byte("v1"), sscli.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("k", statestore.OpSet, "v1")
	_, v2, err := cl.Set(ctx, []byte("k"), []byte("v2"), sscli.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expect("k", statestore.OpSet, "v2")
	for name, c := range map[string]*sscli.Client{"local": cl, "remote": cr} {
		if val, ver, ok, err := c.Get(ctx, []byte("k")); err != nil || !ok || string(val) != "v2" || ver.Compare(v2) != 0 {
			t.Fatalf("%s get: %q %v %v %v (want version %v)", name, val, ver, ok, err, v2)
		}
	}
	if _, _, err := cl.Set(ctx, []byte("e"), []byte("x"), sscli.SetOptions{Expiry: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	expect("e", statestore.OpSet, "x")
	expect("e", statestore.OpDelete, "")
}

// TestStateStoreMQTTClientMovedToAnotherFront: a client watching a key
// through one front (bridge node) reconnects through another and watches
// again there before the first front learns that its old connection
// ended (a reconnect behind a load balancer; a half-open connection found
// dead at its keep-alive). The first front then tells the brokers the
// client left: the watch made through the second front must stay, and
// the client must keep getting notifications. It used to be dropped: the
// brokers dropped a client's registrations whichever front asked.
func TestStateStoreMQTTClientMovedToAnotherFront(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool // the first front calls the broker in process
	}{{"from-remote", false}, {"from-local", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnvWith(t, false, tc.local)
			left := make(chan string, 8)
			_, _, first := e.startFrontOn(t, tc.local, leftBackend{mqtt.NewMemoryBackend(), left})
			_, _, second := e.startFront(t, false)
			ctx := ctx10(t)
			old := dialAt(t, first, "mover")
			if err := old.KeyNotify(ctx, []byte("k"), false); err != nil {
				t.Fatal(err)
			}
			moved := dialAt(t, second, "mover")
			if err := moved.KeyNotify(ctx, []byte("k"), false); err != nil {
				t.Fatal(err)
			}
			// The first front learns now that the old connection ended
			// and tells the brokers before its backend hears of it.
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-left:
				if id != "mover" {
					t.Fatalf("%q left the first front", id)
				}
			case <-ctx.Done():
				t.Fatal("the first front did not see the old connection end")
			}
			w := dialAt(t, e.addr, "writer")
			for i, v := range []string{"v1", "v2"} {
				if _, _, err := w.Set(ctx, []byte("k"), []byte(v), sscli.SetOptions{}); err != nil {
					t.Fatal(err)
				}
				select {
				case n := <-moved.Notifications():
					if n.Op != statestore.OpSet || string(n.Value) != v {
						t.Fatalf("notification %d: %s %q, want SET %q", i, n.Op, n.Value, v)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("no notification %d for the client on the second front", i)
				}
			}
		})
	}
}

// leftBackend is a memory backend that reports each session whose
// connection ended (saved or deleted) on left.
type leftBackend struct {
	*mqtt.MemoryBackend
	left chan<- string
}

func (b leftBackend) SaveSession(ctx context.Context, s *mqtt.SessionState) error {
	b.left <- s.ClientID
	return b.MemoryBackend.SaveSession(ctx, s)
}

func (b leftBackend) DeleteSession(ctx context.Context, clientID string) error {
	b.left <- clientID
	return b.MemoryBackend.DeleteSession(ctx, clientID)
}
