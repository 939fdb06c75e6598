package mqtt

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
)

func pahoClient(t testing.TB, addr, id string, onMsg func(*paho.Publish)) *paho.Client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{ClientID: id, Conn: nc}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { onMsg(pr.Packet); return true, nil },
		}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("paho connect: %v %+v", err, ack)
	}
	t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}) })
	return c
}

func TestMQTTPahoInterop(t *testing.T) {
	ts := startServer(t, nil)
	got := make(chan *paho.Publish, 16)
	sub := pahoClient(t, ts.addr, "paho-sub", func(p *paho.Publish) { got <- p })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sid := 42
	sa, err := sub.Subscribe(ctx, &paho.Subscribe{
		Properties:    &paho.SubscribeProperties{SubscriptionIdentifier: &sid},
		Subscriptions: []paho.SubscribeOptions{{Topic: "paho/+", QoS: 2}},
	})
	if err != nil || len(sa.Reasons) != 1 || sa.Reasons[0] != 2 {
		t.Fatalf("subscribe: %v %+v", err, sa)
	}
	pub := pahoClient(t, ts.addr, "paho-pub", nil)
	for qos := byte(0); qos <= 2; qos++ {
		resp, err := pub.Publish(ctx, &paho.Publish{Topic: "paho/t", QoS: qos, Payload: []byte{'0' + qos},
			Properties: &paho.PublishProperties{ContentType: "x/y", User: paho.UserProperties{{Key: "k", Value: "v"}}}})
		if err != nil || (resp != nil && resp.ReasonCode != 0) {
			t.Fatalf("publish qos %d: %v %+v", qos, err, resp)
		}
		select {
		case p := <-got:
			if p.QoS != qos || string(p.Payload) != string([]byte{'0' + qos}) || p.Properties.ContentType != "x/y" ||
				p.Properties.SubscriptionIdentifier == nil || *p.Properties.SubscriptionIdentifier != 42 ||
				p.Properties.User.Get("k") != "v" {
				t.Fatalf("received %+v %+v", p, p.Properties)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("qos %d not delivered", qos)
		}
	}
}

// TestMQTTMosquittoClients runs mosquitto_sub/mosquitto_pub (v3.1.1 and v5)
// against the server; it skips when they are not installed.
func TestMQTTMosquittoClients(t *testing.T) {
	subBin, err1 := exec.LookPath("mosquitto_sub")
	pubBin, err2 := exec.LookPath("mosquitto_pub")
	if err1 != nil || err2 != nil {
		t.Skip("mosquitto_sub/mosquitto_pub not installed (apt-get install mosquitto-clients)")
	}
	ts := startServer(t, nil)
	host, port, _ := net.SplitHostPort(ts.addr)
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		t.Run(ver, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sub := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", ver, "-t", "mq/"+ver+"/#", "-q", "1", "-C", "3", "-v")
			out := &strings.Builder{}
			sub.Stdout = out
			if err := sub.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 5*time.Second, "subscription", func() bool {
				return len(ts.subs.match("mq/"+ver+"/x", "")) > 0
			})
			for i, qos := range []string{"0", "1", "2"} {
				cmd := exec.CommandContext(ctx, pubBin, "-h", host, "-p", port, "-V", ver, "-t", "mq/"+ver+"/"+qos, "-q", qos, "-m", "hello"+qos)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("pub %d: %v %s", i, err, b)
				}
			}
			if err := sub.Wait(); err != nil {
				t.Fatalf("sub: %v (%s)", err, out)
			}
			want := "mq/" + ver + "/0 hello0\nmq/" + ver + "/1 hello1\nmq/" + ver + "/2 hello2\n"
			if out.String() != want {
				t.Fatalf("got %q want %q", out.String(), want)
			}
		})
	}
}
