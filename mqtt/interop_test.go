package mqtt

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Every MQTT 5 capability the server announces in CONNACK, exercised by
// clients that are not SmartGo's (paho.golang, the mosquitto clients):
// Receive Maximum (both ways), Maximum Packet Size (both ways), Topic
// Alias Maximum (both ways), Retain Available, Wildcard Subscription
// Available (reserved_test.go), Subscription Identifiers Available,
// Shared Subscription Available, and the per-connection properties
// Server Keep Alive, Assigned Client Identifier and Session Expiry
// Interval. The retained-message life cycle is in retained_clean_test.go,
// the receive maximum violation in receivemax_test.go.

func u16(v uint16) *uint16 { return &v }
func u32(v uint32) *uint32 { return &v }

// TestMQTTPahoConnackCapabilities: paho reads what the server announces.
func TestMQTTPahoConnackCapabilities(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.ReceiveMaximum, o.MaxPacketSize, o.TopicAliasMaximum = 7, 4096, 3
	})
	p := pahoDial(t, ts.addr, &paho.Connect{ClientID: "caps", CleanStart: true, KeepAlive: 30}, nil)
	cp := p.ack.Properties
	if cp == nil || cp.ReceiveMaximum == nil || *cp.ReceiveMaximum != 7 || cp.MaximumPacketSize == nil || *cp.MaximumPacketSize != 4096 ||
		cp.TopicAliasMaximum == nil || *cp.TopicAliasMaximum != 3 || !cp.RetainAvailable || !cp.WildcardSubAvailable ||
		!cp.SubIDAvailable || !cp.SharedSubAvailable || cp.MaximumQoS != nil {
		t.Fatalf("CONNACK properties %+v", cp)
	}
}

// TestMQTTPahoReceiveMaximum: paho keeps to the server's receive maximum
// (4) with 40 QoS 1 and 40 QoS 2 publishes in flight at once; all are
// acknowledged and delivered, and the server never disconnects it. The
// other way, the server keeps to paho's receive maximum (2): with the
// acknowledgements held, a third QoS 1 message waits until one is acked.
func TestMQTTPahoReceiveMaximum(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ReceiveMaximum = 4 })
	var held []*paho.Publish
	var hmu sync.Mutex
	sub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "rm-sub", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{ReceiveMaximum: u16(2)}}, func(c *paho.ClientConfig) { c.EnableManualAcknowledgment = true })
	sub.subscribe(t, nil, paho.SubscribeOptions{Topic: "rm/#", QoS: 2})
	pub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "rm-pub", CleanStart: true, KeepAlive: 30}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i := range 80 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := pub.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("rm/%d", i), QoS: byte(1 + i%2), Payload: []byte("x")})
			if err == nil && r != nil && r.ReasonCode != 0 {
				err = fmt.Errorf("reason %#x", r.ReasonCode)
			}
			if err != nil {
				errs <- fmt.Errorf("publish %d: %w", i, err)
			}
		}()
	}
	// The subscriber acknowledges as it goes, two at a time at most.
	for n := 0; n < 80; n++ {
		m := sub.next(t, 10*time.Second)
		if m.QoS > 0 {
			if err := sub.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case d := <-pub.disc:
		t.Fatalf("publisher disconnected: %#x", d.ReasonCode)
	default:
	}
	// Server to client: two unacknowledged QoS 1 messages, the third waits.
	for i := range 3 {
		if err := ts.Publish(ctx, &Message{Topic: fmt.Sprintf("rm/h%d", i), QoS: 1, Payload: []byte("h")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		m := sub.next(t, 5*time.Second)
		hmu.Lock()
		held = append(held, m)
		hmu.Unlock()
	}
	select {
	case m := <-sub.msgs:
		t.Fatalf("%q sent beyond the client's receive maximum of 2", m.Topic)
	case <-time.After(200 * time.Millisecond):
	}
	if err := sub.Ack(held[0]); err != nil {
		t.Fatal(err)
	}
	if m := sub.next(t, 5*time.Second); m.Topic != "rm/h2" {
		t.Fatalf("after an ack got %q, want rm/h2", m.Topic)
	}
}

// TestMQTTPahoMaximumPacketSize: a paho PUBLISH over the announced
// maximum packet size gets DISCONNECT 0x95; a message over paho's own
// maximum is not sent to it (the next one is).
func TestMQTTPahoMaximumPacketSize(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxPacketSize = 1024 })
	small := pahoDial(t, ts.addr, &paho.Connect{ClientID: "mps-sub", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{MaximumPacketSize: u32(256)}}, nil)
	small.subscribe(t, nil, paho.SubscribeOptions{Topic: "mps/#", QoS: 1})
	pub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "mps-pub", CleanStart: true, KeepAlive: 30}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []struct {
		topic string
		size  int
	}{{"mps/big", 600}, {"mps/small", 10}} {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: m.topic, QoS: 1, Payload: make([]byte, m.size)}); err != nil {
			t.Fatal(err)
		}
	}
	if m := small.next(t, 5*time.Second); m.Topic != "mps/small" {
		t.Fatalf("client with maximum packet size 256 got %q (%d bytes)", m.Topic, len(m.Payload))
	}
	pub.Publish(ctx, &paho.Publish{Topic: "mps/huge", QoS: 0, Payload: make([]byte, 2000)})
	select {
	case d := <-pub.disc:
		if d.ReasonCode != byte(packets.ReasonPacketTooLarge) {
			t.Fatalf("DISCONNECT %#x, want 0x95", d.ReasonCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no DISCONNECT for a packet over the maximum")
	}
}

// TestMQTTTopicAliasesInterop: paho publishes with a topic alias (then
// with the alias alone) and is stopped client-side above the announced
// maximum; mosquitto_sub prints the full topic of each message.
// (Server-to-client aliases, which a client enables with its own Topic
// Alias Maximum, are not exercised here: neither paho.golang v0.23 nor
// libmosquitto 2.0 resolves an alias it receives; see TestMQTTTopicAliases.)
func TestMQTTTopicAliasesInterop(t *testing.T) {
	subBin, _ := mosquittoBins(t)
	ts := startServer(t, func(o *Options) { o.TopicAliasMaximum = 2 })
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", "5", "-i", "alias-sub", "-t", "alias/#", "-v", "-C", "4")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool { return ts.subscribedTo("alias-sub", "alias/x") })
	pub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "alias-pub", CleanStart: true, KeepAlive: 30}, nil)
	for i, pp := range []*paho.Publish{
		{Topic: "alias/one", Properties: &paho.PublishProperties{TopicAlias: u16(1)}},
		{Topic: "", Properties: &paho.PublishProperties{TopicAlias: u16(1)}},
		{Topic: "alias/two", Properties: &paho.PublishProperties{TopicAlias: u16(2)}},
		{Topic: "", Properties: &paho.PublishProperties{TopicAlias: u16(1)}},
	} {
		pp.QoS, pp.Payload = 1, []byte(fmt.Sprint(i))
		if r, err := pub.Publish(ctx, pp); err != nil || r.ReasonCode != 0 {
			t.Fatalf("publish %d: %v %+v", i, err, r)
		}
	}
	if _, err := pub.Publish(ctx, &paho.Publish{Topic: "alias/three", QoS: 1, Properties: &paho.PublishProperties{TopicAlias: u16(3)}}); !errors.Is(err, paho.ErrInvalidArguments) {
		t.Fatalf("alias 3 over the announced maximum 2: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v\n%s", err, out.String())
	}
	if got, want := out.String(), "alias/one 0\nalias/one 1\nalias/two 2\nalias/one 3\n"; got != want {
		t.Fatalf("mosquitto_sub printed %q, want %q", got, want)
	}
}

// TestMQTTPahoRetainAvailable: a retained paho PUBLISH reaches a later
// paho subscriber flagged retained; retain handling 2 suppresses it.
func TestMQTTPahoRetainAvailable(t *testing.T) {
	ts := startServer(t, nil)
	pub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "ret-pub", CleanStart: true, KeepAlive: 30}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pub.Publish(ctx, &paho.Publish{Topic: "ret/a", QoS: 1, Retain: true, Payload: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	sub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "ret-sub", CleanStart: true, KeepAlive: 30}, nil)
	sub.subscribe(t, nil, paho.SubscribeOptions{Topic: "ret/#", QoS: 1})
	if m := sub.next(t, 5*time.Second); m.Topic != "ret/a" || !m.Retain || string(m.Payload) != "kept" {
		t.Fatalf("retained delivery %+v", m)
	}
	none := pahoDial(t, ts.addr, &paho.Connect{ClientID: "ret-none", CleanStart: true, KeepAlive: 30}, nil)
	none.subscribe(t, nil, paho.SubscribeOptions{Topic: "ret/#", RetainHandling: 2}, paho.SubscribeOptions{Topic: "sentinel"})
	ts.Publish(ctx, &Message{Topic: "sentinel"})
	if got := none.topicsUntil(t, "sentinel"); len(got) != 0 {
		t.Fatalf("retain handling 2 got %q", got)
	}
}

// TestMQTTSharedSubscriptionsInterop: two paho members of
// $share/g/jobs/#: each of 30 mosquitto_pub messages goes to exactly one
// member, and both get some.
func TestMQTTSharedSubscriptionsInterop(t *testing.T) {
	_, pubBin := mosquittoBins(t)
	ts := startServer(t, nil)
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var members []*pahoPeer
	for i := range 2 {
		p := pahoDial(t, ts.addr, &paho.Connect{ClientID: fmt.Sprintf("share-%d", i), CleanStart: true, KeepAlive: 30}, nil)
		if codes := p.subscribe(t, nil, paho.SubscribeOptions{Topic: "$share/g/jobs/#", QoS: 1}); !slices.Equal(codes, []byte{1}) {
			t.Fatalf("SUBACK %#x", codes)
		}
		members = append(members, p)
	}
	const n = 30
	for i := range n {
		runMosquitto(t, ctx, false, pubBin, "-h", host, "-p", port, "-q", "1", "-t", fmt.Sprintf("jobs/%d", i), "-m", "j")
	}
	got := map[string]int{}
	per := make([]int, 2)
	for total := 0; total < n; total++ {
		select {
		case m := <-members[0].msgs:
			got[m.Topic]++
			per[0]++
		case m := <-members[1].msgs:
			got[m.Topic]++
			per[1]++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d messages delivered to the group", total, n)
		}
	}
	for i := range n {
		if c := got[fmt.Sprintf("jobs/%d", i)]; c != 1 {
			t.Errorf("jobs/%d delivered %d times to the group", i, c)
		}
	}
	if slices.Contains(per, 0) {
		t.Errorf("a member got nothing: %v", per)
	}
	for _, m := range members {
		select {
		case x := <-m.msgs:
			t.Fatalf("extra delivery %q", x.Topic)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestMQTTPahoServerKeepAlive: paho asking for no keep alive is told the
// server's (1 s) and pings by it: the connection outlives 1.5 s idle.
func TestMQTTPahoServerKeepAlive(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.KeepAliveMax = time.Second })
	p := pahoDial(t, ts.addr, &paho.Connect{ClientID: "ka", CleanStart: true, KeepAlive: 0}, nil)
	if ka := p.ack.Properties.ServerKeepAlive; ka == nil || *ka != 1 {
		t.Fatalf("Server Keep Alive %v, want 1", ka)
	}
	time.Sleep(2500 * time.Millisecond) // the behaviour under test is an idle period
	select {
	case d := <-p.disc:
		t.Fatalf("disconnected: %#x", d.ReasonCode)
	default:
	}
	if !ts.Connected("ka") {
		t.Fatal("paho's connection is gone")
	}
}

// TestMQTTPahoAssignedClientID: paho connecting with an empty client id
// gets one assigned and uses it.
func TestMQTTPahoAssignedClientID(t *testing.T) {
	ts := startServer(t, nil)
	p := pahoDial(t, ts.addr, &paho.Connect{CleanStart: true, KeepAlive: 30}, nil)
	id := p.ack.Properties.AssignedClientID
	if !strings.HasPrefix(id, "smartgo-") || !ts.Connected(id) {
		t.Fatalf("assigned client id %q", id)
	}
}

// TestMQTTPahoSessionExpiry: paho asks for a session that never expires,
// is told the server's cap, and on resuming finds its session with the
// QoS 1 message published while it was away.
func TestMQTTPahoSessionExpiry(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.SessionExpiryMax = time.Hour })
	cp := &paho.Connect{ClientID: "resume", CleanStart: true, KeepAlive: 30,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: u32(0xFFFFFFFF)}}
	p := pahoDial(t, ts.addr, cp, nil)
	if se := p.ack.Properties.SessionExpiryInterval; se == nil || *se != 3600 {
		t.Fatalf("CONNACK session expiry %v, want 3600", se)
	}
	p.subscribe(t, nil, paho.SubscribeOptions{Topic: "away/#", QoS: 1})
	p.Disconnect(&paho.Disconnect{})
	testutil.WaitFor(t, 5*time.Second, "offline", func() bool { return !ts.Connected("resume") })
	if err := ts.Publish(context.Background(), &Message{Topic: "away/1", QoS: 1, Payload: []byte("queued")}); err != nil {
		t.Fatal(err)
	}
	cp.CleanStart = false
	q := pahoDial(t, ts.addr, cp, nil)
	if !q.ack.SessionPresent {
		t.Fatal("session not present")
	}
	if m := q.next(t, 5*time.Second); m.Topic != "away/1" || string(m.Payload) != "queued" {
		t.Fatalf("resumed session got %+v", m)
	}
}

// TestMQTTRefusedConnectLogged: a CONNECT refused for bad credentials
// (mosquitto_pub, 3.1.1 and 5) is logged with its reason, never as
// reason=success.
func TestMQTTRefusedConnectLogged(t *testing.T) {
	_, pubBin := mosquittoBins(t)
	path := mqtttest.CredentialsFile(t, "alice", "s3cret")
	ts := startServer(t, func(o *Options) { o.CredentialsFile = path })
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		out := runMosquitto(t, ctx, true, pubBin, "-h", host, "-p", port, "-V", ver, "-i", "bad-"+ver, "-u", "alice", "-P", "wrong", "-t", "x", "-m", "y")
		if !strings.Contains(strings.ToLower(out), "bad user name or password") && !strings.Contains(strings.ToLower(out), "not authori") {
			t.Errorf("%s: mosquitto_pub printed %q", ver, out)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "two refusals logged", func() bool {
		return strings.Count(ts.logs.String(), "CONNECT refused") == 2
	})
	for _, l := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(l, "CONNECT refused") && (strings.Contains(l, "reason=success") || !strings.Contains(l, `reason="bad user name or password" code=134`)) {
			t.Fatalf("refused CONNECT logged as %q", l)
		}
	}
}
