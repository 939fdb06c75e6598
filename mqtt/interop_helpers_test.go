package mqtt

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/mqtttest"
)

// Helpers for the tests that drive the server with clients that are not
// SmartGo's: paho.golang (MQTT 5) and mosquitto_sub/mosquitto_pub.

// pahoPeer is a connected paho.golang client whose received PUBLISHes and
// server DISCONNECTs arrive on channels.
type pahoPeer struct {
	*paho.Client
	ack  *paho.Connack
	msgs chan *paho.Publish
	disc chan *paho.Disconnect
}

// pahoDial connects a paho client with cp (mod may adjust the client
// configuration first); it fails the test unless the CONNACK is success.
func pahoDial(t testing.TB, addr string, cp *paho.Connect, mod func(*paho.ClientConfig)) *pahoPeer {
	t.Helper()
	p, err := pahoTry(t, addr, cp, mod)
	if err != nil {
		t.Fatalf("paho connect %q: %v", cp.ClientID, err)
	}
	if p.ack.ReasonCode != 0 {
		t.Fatalf("paho connect %q: CONNACK %#x", cp.ClientID, p.ack.ReasonCode)
	}
	return p
}

// pahoTry is pahoDial returning the CONNACK whatever its code.
func pahoTry(t testing.TB, addr string, cp *paho.Connect, mod func(*paho.ClientConfig)) (*pahoPeer, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &pahoPeer{msgs: make(chan *paho.Publish, 4096), disc: make(chan *paho.Disconnect, 1)}
	cfg := paho.ClientConfig{ClientID: cp.ClientID, Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { p.msgs <- pr.Packet; return true, nil },
		},
		OnServerDisconnect: func(d *paho.Disconnect) {
			select {
			case p.disc <- d:
			default:
			}
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	p.Client = paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.ack, err = p.Connect(ctx, cp)
	if p.ack != nil && p.ack.ReasonCode == 0 {
		t.Cleanup(func() { p.Disconnect(&paho.Disconnect{}) })
	} else {
		nc.Close()
	}
	if p.ack != nil {
		err = nil
	}
	return p, err
}

// subscribe sends one SUBSCRIBE and returns its reason codes.
func (p *pahoPeer) subscribe(t testing.TB, props *paho.SubscribeProperties, subs ...paho.SubscribeOptions) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sa, err := p.Subscribe(ctx, &paho.Subscribe{Properties: props, Subscriptions: subs})
	if sa == nil {
		t.Fatalf("subscribe: %v", err)
	}
	return sa.Reasons
}

// next returns the next PUBLISH within d, or fails the test.
func (p *pahoPeer) next(t testing.TB, d time.Duration) *paho.Publish {
	t.Helper()
	select {
	case m := <-p.msgs:
		return m
	case <-time.After(d):
		t.Fatal("paho: no PUBLISH within", d)
		return nil
	}
}

// topicsUntil collects the topics received before the first on sentinel.
func (p *pahoPeer) topicsUntil(t testing.TB, sentinel string) []string {
	t.Helper()
	var got []string
	for {
		m := p.next(t, 10*time.Second)
		if m.Topic == sentinel {
			return got
		}
		got = append(got, m.Topic)
	}
}

// mosquittoBins returns the mosquitto_sub and mosquitto_pub paths, or
// skips the test.
func mosquittoBins(t testing.TB) (sub, pub string) { t.Helper(); return mqtttest.Mosquitto(t) }

// hostPort splits a listener address for the mosquitto clients' -h/-p.
func hostPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}

// subscribedTo reports whether clientID's session has a subscription
// matching topic.
func (ts *testServer) subscribedTo(clientID, topic string) bool {
	for _, tg := range ts.subs.match(topic, "") {
		if tg.s.id == clientID {
			return true
		}
	}
	return false
}

// runMosquitto runs a mosquitto client to completion and returns its
// output; it fails the test on a non-zero exit unless allowFail.
func runMosquitto(t testing.TB, ctx context.Context, allowFail bool, bin string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil && !allowFail {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}
