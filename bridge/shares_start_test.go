package bridge

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
)

// pahoShareMember connects a paho (MQTT 5) client to addr that counts
// the payloads it receives.
func pahoShareMember(t *testing.T, ctx context.Context, addr, id string, mu *sync.Mutex, got map[string]int) *paho.Client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			mu.Lock()
			got[string(pr.Packet.Payload)]++
			mu.Unlock()
			return true, nil
		}}})
	if ack, err := pc.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect %s: %v %+v", id, err, ack)
	}
	t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
	return pc
}

// TestBridgeSharedSubscriptionFromSuback: messages published right after
// the SUBACK of a new shared subscription reach its members. The group's
// consumer starts after the SUBACK; it used to take its start offsets
// then, so what was published in between was skipped.
func TestBridgeSharedSubscriptionFromSuback(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	checkShareFromSuback(t, ctx, b, "share", "first")
}

// checkShareFromSuback publishes history on work/early, subscribes two
// members (ids prefix-m1, prefix-m2) to $share/name/work/#, publishes 20
// messages right after their SUBACKs and checks that the members get
// each of those once and none of the history.
func checkShareFromSuback(t *testing.T, ctx context.Context, b *Bridge, prefix, name string) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	// History the new subscription must not get.
	early := pahoShareMember(t, ctx, addrOf(b), prefix+"-early", &mu, map[string]int{})
	for i := range 5 {
		if _, err := early.Publish(ctx, &paho.Publish{Topic: "work/early", QoS: 1, Payload: []byte(fmt.Sprint("early-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{prefix + "-m1", prefix + "-m2"} {
		m := pahoShareMember(t, ctx, addrOf(b), id, &mu, got)
		if sa, err := m.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/" + name + "/work/#", QoS: 1}}}); err != nil || sa.Reasons[0] != 1 {
			t.Fatalf("subscribe %s: %v %+v", id, err, sa)
		}
	}
	pub := pahoShareMember(t, ctx, addrOf(b), prefix+"-pub", &mu, map[string]int{})
	const n = 20
	for i := range n {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("work/%d", i), QoS: 1, Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "every message published after the SUBACK at the members", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("the members got %d distinct messages, want %d: %v", len(got), n, got)
	}
	for i := range n {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d delivered %d times", i, got[fmt.Sprint(i)])
		}
	}
}
