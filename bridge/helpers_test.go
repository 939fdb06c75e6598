package bridge

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

func startCluster(t testing.TB) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var testRoutes = []Route{{Filter: "devices/+/telemetry", Topic: "TELEMETRY"}}

// startBridge starts a bridge node on 127.0.0.1:0; Close runs at cleanup
// (closing it earlier is fine).
func startBridge(t testing.TB, c *cluster.Cluster, mod func(*mqtt.Options, *Options)) *Bridge {
	t.Helper()
	return startBridgeWith(t, c, mod, nil)
}

// startBridgeWith is startBridge with pre, when not nil, run on the
// bridge before it starts (to set test hooks).
func startBridgeWith(t testing.TB, c *cluster.Cluster, mod func(*mqtt.Options, *Options), pre func(*Bridge)) *Bridge {
	t.Helper()
	mo := mqtt.DefaultOptions()
	mo.Listen = []string{"127.0.0.1:0"}
	bo := DefaultOptions(c.RegistryAddrs()...)
	bo.Routes = testRoutes
	bo.TopicQueues = 4
	if mod != nil {
		mod(&mo, &bo)
	}
	b, err := New(mo, bo)
	if err != nil {
		t.Fatal(err)
	}
	if pre != nil {
		pre(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func addrOf(b *Bridge) string { return b.Addrs()[0].String() }

func newProducer(t testing.TB, c *cluster.Cluster) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.DefaultProducerOptions(c.RegistryAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newPull consumes every queue of topic from its start.
func newPull(t testing.TB, c *cluster.Cluster, topic string) *client.PullConsumer {
	t.Helper()
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}, Group: "TEST_READER", From: client.ConsumeFromFirst,
		PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qs, err := pc.Queues(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// pollN polls until n messages arrived.
func pollN(t testing.TB, pc *client.PullConsumer, n int) []*client.MessageExt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*client.MessageExt
	for len(out) < n {
		msgs, err := pc.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d: %v", len(out), n, err)
		}
		out = append(out, msgs...)
	}
	return out
}

// rawClient is a minimal MQTT client on mqtt/packets (internal/mqtttest).
type rawClient struct {
	*mqtttest.Conn
	t  testing.TB
	nc net.Conn
	v  packets.Version
}

func dialRaw(t testing.TB, addr string, v packets.Version) *rawClient {
	t.Helper()
	c := mqtttest.Dial(t, addr, v)
	c.RecvTimeout = 10 * time.Second
	return &rawClient{Conn: c, t: t, nc: c.NC, v: v}
}

func (r *rawClient) send(p packets.Packet) { r.t.Helper(); r.Send(p) }
func (r *rawClient) recv() packets.Packet  { r.t.Helper(); return r.Recv() }
func (r *rawClient) next(timeout time.Duration) (packets.Packet, error) {
	return r.Next(timeout)
}

// nothing asserts no packet arrives within d and the connection stays.
func (r *rawClient) nothing(d time.Duration) {
	r.t.Helper()
	if p, err := r.next(d); err == nil {
		r.t.Fatalf("unexpected %T %+v", p, p)
	} else if errors.Is(err, io.EOF) {
		r.t.Fatalf("connection closed")
	}
}

// connect sends cp and requires a successful CONNACK.
func (r *rawClient) connect(cp *packets.Connect) *packets.Connack {
	r.t.Helper()
	ack := r.Connect(cp)
	if ack.ReasonCode != 0 {
		r.t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	return ack
}

// persistent connects a v5 client with a one-hour session expiry.
func persistent(t testing.TB, addr, id string, clean bool) (*rawClient, *packets.Connack) {
	t.Helper()
	r := dialRaw(t, addr, packets.Version5)
	cp := &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 3600
	return r, r.connect(cp)
}

func connected(t testing.TB, addr string, v packets.Version, id string) *rawClient {
	t.Helper()
	r := dialRaw(t, addr, v)
	r.connect(&packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60})
	return r
}

func (r *rawClient) subscribe(id uint16, subs ...packets.Subscription) *packets.Suback {
	r.t.Helper()
	r.send(&packets.Subscribe{PacketID: id, Subscriptions: subs})
	p := r.recv()
	sa, ok := p.(*packets.Suback)
	if !ok {
		r.t.Fatalf("want SUBACK, got %T %+v", p, p)
	}
	return sa
}

// expectPublish returns the next PUBLISH, acknowledging QoS 1.
func (r *rawClient) expectPublish() *packets.Publish {
	r.t.Helper()
	p := r.recv()
	pub, ok := p.(*packets.Publish)
	if !ok {
		r.t.Fatalf("want PUBLISH, got %T %+v", p, p)
	}
	if pub.QoS == 1 {
		r.send(&packets.Puback{PacketID: pub.PacketID})
	}
	return pub
}

func (r *rawClient) publish1(id uint16, p *packets.Publish) *packets.Puback {
	r.t.Helper()
	p.QoS, p.PacketID = 1, id
	r.send(p)
	got := r.recv()
	a, ok := got.(*packets.Puback)
	if !ok {
		r.t.Fatalf("want PUBACK, got %T %+v", got, got)
	}
	return a
}

func (r *rawClient) disconnect() {
	r.t.Helper()
	r.send(&packets.Disconnect{})
	r.nc.Close()
}

func sub(filter string, qos byte) packets.Subscription {
	return packets.Subscription{Filter: filter, QoS: qos}
}
