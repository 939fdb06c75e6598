package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Auto-creation of subscription groups stops at MaxAutoCreatedGroups: a
// client naming ever new groups (a pull, a heartbeat) no longer grows
// subscriptionGroup.json, and is told why its pulls are refused; an
// admin still creates groups, and the groups kept serve after a restart.
func TestBrokerAutoCreatedGroupsLimit(t *testing.T) {
	dir := t.TempDir()
	limit := func(o *Options) { o.MaxAutoCreatedGroups = 3 }
	b := testBroker(t, dir, limit)
	c := newTestClient(t, b.Addr())
	c.mustSend("Lim", 0, "m", "")
	waitDispatched(t, b, "Lim", 0, 1)
	for _, g := range []string{"g1", "g2", "g3"} {
		if r := c.pull(g, "Lim", 0, 0, flagSubscription, 0, "*"); r.code != protocol.Success {
			t.Fatalf("pull of %s under the limit: code %d", g, r.code)
		}
	}
	n := len(b.groups.Snapshot().SubscriptionGroupTable)
	if n > 3 {
		t.Fatalf("%d groups after 3 auto-created with a limit of 3", n)
	}
	c.heartbeat("over@1", "g4", protocol.MessageModelClustering, map[string]string{"Lim": "*"})
	resp := c.invoke(protocol.PullMessage, &protocol.PullMessageRequestHeader{ConsumerGroup: "g4", Topic: "Lim", QueueID: 0,
		MaxMsgNums: 32, SysFlag: flagSubscription, Subscription: "*", ExpressionType: "TAG"}, nil)
	if resp.Code != protocol.SubscriptionGroupNotExist || !strings.Contains(resp.Remark, "max_auto_created_groups") {
		t.Fatalf("pull of a group over the limit: %d %q, want SUBSCRIPTION_GROUP_NOT_EXIST naming the option", resp.Code, resp.Remark)
	}
	if _, err := b.groups.FindOrCreate("g5"); !errors.Is(err, ErrGroupLimit) || !errors.Is(err, ErrGroupNotExist) {
		t.Fatalf("FindOrCreate over the limit: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config", SubscriptionGroupFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"g4"`) || !strings.Contains(string(raw), `"g3"`) {
		t.Fatalf("persisted groups: %s", raw)
	}
	// An admin is not limited.
	if err := b.groups.Update(DefaultSubscriptionGroup("admin-made")); err != nil {
		t.Fatalf("admin update over the limit: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := testBroker(t, dir, limit)
	c2 := newTestClient(t, b2.Addr())
	for _, g := range []string{"g1", "admin-made"} {
		if r := c2.pull(g, "Lim", 0, 0, flagSubscription, 0, "*"); r.code != protocol.Success {
			t.Fatalf("pull of kept group %s after restart: code %d", g, r.code)
		}
	}
}
