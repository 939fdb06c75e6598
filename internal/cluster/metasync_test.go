package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestClusterHASlaveCopiesMetadataChangeAtOnce: a slave whose periodic
// copy is an hour away still gets a topic's permission and queue counts
// and a group's retry settings changed on its master, promptly (the
// master's NOTIFY_METADATA_CHANGED), so a promotion right after the
// change would keep it.
func TestClusterHASlaveCopiesMetadataChangeAtOnce(t *testing.T) {
	c := startHACluster(t, Options{Slave: func(_ int, o *broker.Options) { o.SlaveSyncInterval = time.Hour }})
	m, s := c.Broker(0), c.Slave(0)
	// The slave's first copy (a second after it starts).
	topicsCopied(t, m, s, 20*time.Second)
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ctx := context.Background()
	const topic, group = "MetaNotice", "meta-notice-cg"
	if err := a.CreateTopic(ctx, "TestCluster", admin.TopicConfig{Name: topic, ReadQueues: 4, WriteQueues: 4}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateGroup(ctx, "TestCluster", admin.GroupConfig{Name: group, RetryMaxTimes: 5}); err != nil {
		t.Fatal(err)
	}
	slaveHas := func(read, write, perm, retries int32) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() error {
			tc, ok := s.Topics().Get(topic)
			if !ok || tc.ReadQueueNums != read || tc.WriteQueueNums != write || tc.Perm != perm {
				return fmt.Errorf("slave's topic %+v (%v), want %d/%d perm %d", tc, ok, read, write, perm)
			}
			if g, ok := s.Groups().Get(group); !ok || g.RetryMaxTimes != retries {
				return fmt.Errorf("slave's group %+v (%v), want %d retries", g, ok, retries)
			}
			return nil
		})
	}
	slaveHas(4, 4, broker.PermRW, 5)
	// Shrink the queues, make the topic read-only, change the retries.
	if err := a.CreateTopic(ctx, "TestCluster", admin.TopicConfig{Name: topic, ReadQueues: 2, WriteQueues: 2, Perm: broker.PermRead}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateGroup(ctx, "TestCluster", admin.GroupConfig{Name: group, RetryMaxTimes: 2}); err != nil {
		t.Fatal(err)
	}
	slaveHas(2, 2, broker.PermRead, 2)
}

// TestClusterHASlaveCopiesMetadataAfterReconnect: a change made while the
// slave's replication link is cut reaches no slave (the master notices
// only the connected ones); the slave copies it as soon as the link is
// back, not at its next periodic copy an hour later.
func TestClusterHASlaveCopiesMetadataAfterReconnect(t *testing.T) {
	proxy := newLinkProxy(t)
	c := startHACluster(t, Options{Slave: func(_ int, o *broker.Options) {
		o.SlaveSyncInterval = time.Hour
		o.HAMasterAddress = proxy.addr()
	}})
	target := c.Broker(0).HAAddr()
	proxy.target.Store(&target)
	m, s := c.Broker(0), c.Slave(0)
	topicsCopied(t, m, s, 20*time.Second)
	proxy.set(linkCut)
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := len(m.HAServer().Slaves()); n > 0 {
			return fmt.Errorf("%d slaves still connected", n)
		}
		return nil
	})
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	const topic = "MetaWhileCut"
	if err := a.CreateTopic(context.Background(), "TestCluster", admin.TopicConfig{Name: topic, ReadQueues: 3, WriteQueues: 3}); err != nil {
		t.Fatal(err)
	}
	proxy.set(linkPass)
	testutil.Eventually(t, 20*time.Second, func() error {
		if tc, ok := s.Topics().Get(topic); !ok || tc.ReadQueueNums != 3 {
			return fmt.Errorf("slave's topic %+v (%v), want 3 queues", tc, ok)
		}
		return nil
	})
}
