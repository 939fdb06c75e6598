package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func startHACluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	opts.Dir = t.TempDir()
	opts.Slaves = true
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newProducer(t *testing.T, c *Cluster) *client.Producer {
	t.Helper()
	po := client.DefaultProducerOptions(c.RegistryAddrs()...)
	po.RouteRefresh = 300 * time.Millisecond
	po.Retries = -1
	p, err := client.NewProducer(po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func caughtUp(c *Cluster, i int) error {
	m, s := c.Broker(i), c.Slave(i)
	if m == nil || s == nil {
		return errors.New("broker stopped")
	}
	if a, b := m.Store().MaxPhysicalOffset(), s.Store().MaxPhysicalOffset(); a != b {
		return fmt.Errorf("slave at %d, master at %d", b, a)
	}
	return nil
}

// TestClusterHASyncMaster: a sync master answers after the slave has the
// message, SLAVE_NOT_AVAILABLE without a slave, and recovers when the slave
// returns; the slave copies the master's topics.
func TestClusterHASyncMaster(t *testing.T) {
	c := startHACluster(t, Options{SyncMaster: true})
	p := newProducer(t, c)
	ctx := context.Background()
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := c.Slave(0).Store().MaxPhysicalOffset(), c.Broker(0).HAServer() != nil; !ok {
			return errors.New("no HA server")
		}
		if len(c.Broker(0).HAServer().Slaves()) == 0 {
			return errors.New("slave not connected")
		}
		return nil
	})
	for i := range 200 {
		r, err := p.Send(ctx, &client.Message{Topic: "HASync", Body: fmt.Appendf(nil, "m%d", i)})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if r.Status != client.SendOK {
			t.Fatalf("send %d: status %v", i, r.Status)
		}
	}
	if err := caughtUp(c, 0); err != nil {
		// Acked means the slave has it: its end can only be at or past.
		if c.Slave(0).Store().MaxPhysicalOffset() < c.Broker(0).Store().MaxPhysicalOffset() {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := c.Slave(0).Topics().Get("HASync"); !ok {
			return errors.New("topic not copied to the slave")
		}
		return nil
	})
	if err := c.StopSlave(0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		r, err := p.Send(ctx, &client.Message{Topic: "HASync", Body: []byte("no slave")})
		if err != nil {
			return err
		}
		if r.Status != client.SendSlaveNotAvailable {
			return fmt.Errorf("status %v", r.Status)
		}
		return nil
	})
	if err := c.StartSlave(0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		r, err := p.Send(ctx, &client.Message{Topic: "HASync", Body: []byte("back")})
		if err != nil {
			return err
		}
		if r.Status != client.SendOK {
			return fmt.Errorf("status %v", r.Status)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error { return caughtUp(c, 0) })
	info := c.Broker(0).RuntimeInfo()
	if info["haSlaveCount"] != "1" || info["slaveAckOffset"] == "" {
		t.Fatalf("runtime info: %v", info)
	}
}

// TestClusterHASlaveReads: a slave sends consumers back to a live master
// unless slave reads are on, and serves the group while the master is
// down; the restarted master's new messages reach the slave.
func TestClusterHASlaveReads(t *testing.T) {
	c := startHACluster(t, Options{})
	p := newProducer(t, c)
	ctx := context.Background()
	const n = 300
	for i := range n {
		if _, err := p.Send(ctx, &client.Message{Topic: "HARead", Body: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error { return caughtUp(c, 0) })
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := c.Slave(0).Topics().Get("HARead"); !ok {
			return errors.New("topic not copied to the slave")
		}
		return nil
	})

	// Master up, slave reads off: PULL_RETRY_IMMEDIATELY, suggest master.
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	pull := func() *protocol.Command {
		h := &protocol.PullMessageRequestHeader{ConsumerGroup: "g-raw", Topic: "HARead", QueueID: 0, QueueOffset: 0, MaxMsgNums: 8,
			SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
		resp, err := rc.Invoke(ctx, c.SlaveAddr(0), protocol.NewRequest(protocol.PullMessage, h, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := pull()
	var rh protocol.PullMessageResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil {
		t.Fatal(err)
	}
	if resp.Code != protocol.PullRetryImmediately || rh.SuggestWhichBrokerID != broker.MasterID {
		t.Fatalf("slave pull with master up: code %d suggest %d", resp.Code, rh.SuggestWhichBrokerID)
	}

	// A consumer started against the master, held by flow control with
	// most messages unread; then the master goes down and the group reads
	// the rest from the slave.
	var mu sync.Mutex
	seen := map[string]int{}
	gate := make(chan struct{})
	co := client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs(), RouteRefresh: 300 * time.Millisecond},
		Group: "g-slave", From: client.ConsumeFromFirst, PullSuspend: time.Second, PullBatchSize: 4, QueueMaxMessages: 4,
		ConsumeGoroutines: 1, PersistInterval: 200 * time.Millisecond}
	cons, err := client.NewPushConsumer(co, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		<-gate
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen[string(m.Body)]++
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	if err := cons.Subscribe("HARead", "*"); err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(cons.Assigned()) == 0 {
			return errors.New("no queues yet")
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // let the first pulls land on the master
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if c.Slave(0).HAClient().Connected() {
			return errors.New("slave still connected")
		}
		return nil
	})
	if resp := pull(); resp.Code != protocol.Success {
		t.Fatalf("slave pull with master down: code %d %s", resp.Code, resp.Remark)
	}
	close(gate)
	testutil.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != n {
			return fmt.Errorf("consumed %d of %d (master down after the start)", len(seen), n)
		}
		return nil
	})

	// Master back: the slave resumes from where it was.
	before := c.Slave(0).Store().MaxPhysicalOffset()
	if err := c.StartBroker(0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := p.Send(ctx, &client.Message{Topic: "HARead", Body: []byte("after")})
		return err
	})
	testutil.Eventually(t, 10*time.Second, func() error { return caughtUp(c, 0) })
	if c.Slave(0).Store().MaxPhysicalOffset() <= before {
		t.Fatal("slave did not grow after the master came back")
	}
}
