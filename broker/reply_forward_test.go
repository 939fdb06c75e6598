package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// The brokers a reply is forwarded to: the masters of the broker's own
// cluster, sorted by name, without itself (by name or address), slaves
// and other clusters left out.
func TestBrokerReplyForwardPeers(t *testing.T) {
	ci := &protocol.ClusterInfo{
		ClusterAddrTable: map[string][]string{"C": {"c", "a", "self", "b", "a"}, "Other": {"x"}},
		BrokerAddrTable: map[string]*protocol.BrokerData{
			"a":    {BrokerName: "a", Cluster: "C", BrokerAddrs: map[int64]string{0: "10.0.0.1:1", 1: "10.0.0.2:1"}},
			"b":    {BrokerName: "b", Cluster: "C", BrokerAddrs: map[int64]string{1: "10.0.0.3:1"}}, // no master
			"c":    {BrokerName: "c", Cluster: "C", BrokerAddrs: map[int64]string{0: "10.0.0.9:9"}}, // our address
			"self": {BrokerName: "self", Cluster: "C", BrokerAddrs: map[int64]string{0: "10.0.0.5:1"}},
			"x":    {BrokerName: "x", Cluster: "Other", BrokerAddrs: map[int64]string{0: "10.0.0.7:1"}},
		},
	}
	if got := clusterMasters(ci, "C", "self", "10.0.0.9:9"); !slices.Equal(got, []string{"10.0.0.1:1"}) {
		t.Fatalf("peers %v", got)
	}
	ci.ClusterAddrTable["C"] = append(ci.ClusterAddrTable["C"], "missing")
	ci.BrokerAddrTable["d"] = &protocol.BrokerData{BrokerAddrs: map[int64]string{0: "10.0.0.4:1"}}
	ci.ClusterAddrTable["C"] = append(ci.ClusterAddrTable["C"], "d")
	if got := clusterMasters(ci, "C", "self", "10.0.0.9:9"); !slices.Equal(got, []string{"10.0.0.1:1", "10.0.0.4:1"}) {
		t.Fatalf("peers %v", got)
	}
	if got := clusterMasters(ci, "Nope", "self", ""); len(got) != 0 {
		t.Fatalf("peers of an unknown cluster %v", got)
	}
}

// A forward is bounded by the push timeout, or by the reply's TTL when
// shorter (milliseconds, or seconds below 1000 as rocketmq-client-go
// writes it); a missing or bad TTL leaves the push timeout.
func TestBrokerReplyForwardBound(t *testing.T) {
	for ttl, want := range map[string]time.Duration{
		"": replyPushTimeout, "x": replyPushTimeout, "0": replyPushTimeout, "-3": replyPushTimeout,
		"1": time.Second, "2": 2 * time.Second, "5": replyPushTimeout, "1500": 1500 * time.Millisecond,
		"30000": replyPushTimeout,
	} {
		var p record.Properties
		if ttl != "" {
			p.Set(record.PropertyTTL, ttl)
		}
		if got := replyForwardBound(p.String()); got != want {
			t.Errorf("TTL %q: bound %v, want %v", ttl, got, want)
		}
	}
}

// At most replyForwardsMax forwards run at once (the next is refused at
// once, not queued); none starts after close, which cancels and waits for
// those in flight.
func TestBrokerReplyForwarderBounded(t *testing.T) {
	f := newReplyForwarder(nil)
	release := make(chan struct{})
	cancelled := make(chan struct{}, replyForwardsMax)
	for i := range replyForwardsMax {
		if !f.start(func(ctx context.Context) {
			select {
			case <-release:
			case <-ctx.Done():
				cancelled <- struct{}{}
			}
		}) {
			t.Fatalf("forward %d refused", i)
		}
	}
	if f.start(func(context.Context) { t.Error("a forward beyond the bound ran") }) {
		t.Fatal("a forward beyond the bound was started")
	}
	f.close() // cancels the forwards in flight and waits for them
	if len(cancelled) != replyForwardsMax {
		t.Fatalf("%d of %d forwards saw the cancel", len(cancelled), replyForwardsMax)
	}
	if f.start(func(context.Context) { t.Error("a forward ran after close") }) {
		t.Fatal("a forward started after close")
	}
	f.close() // idempotent
	close(release)
}
