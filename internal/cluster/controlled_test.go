package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

func testLog() *slog.Logger {
	if os.Getenv("SMARTGO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

func startControlled(t *testing.T, opts CtlOptions) *Controlled {
	t.Helper()
	opts.Dir = t.TempDir()
	if opts.Logger == nil {
		opts.Logger = testLog()
	}
	c, err := StartControlled(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctlProducer is a producer of c's registries that follows a failover
// quickly (routes refreshed every 200 ms), each send bounded by timeout.
func ctlProducer(t *testing.T, c *Controlled, timeout time.Duration) *client.Producer {
	t.Helper()
	po := client.DefaultProducerOptions(c.RegistryAddrs()...)
	po.RouteRefresh, po.SendTimeout = 200*time.Millisecond, timeout
	p, err := client.NewProducer(po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// waitSyncSet waits until the master's sync state set has n members.
func waitSyncSet(t *testing.T, c *Controlled, n int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		j, ok := c.Master()
		if !ok {
			return errors.New("no master")
		}
		if _, _, _, set := c.Broker(j).ControllerState(); len(set) != n {
			return fmt.Errorf("sync state set %v", set)
		}
		return nil
	})
}

// logsEqual compares two stores' commitlogs from the later start to the
// shorter end.
func logsEqual(t *testing.T, a, b *store.Store) {
	t.Helper()
	from, to := max(a.MinPhysicalOffset(), b.MinPhysicalOffset()), min(a.MaxPhysicalOffset(), b.MaxPhysicalOffset())
	for pos := from; pos < to; {
		ra, err := a.ReadRaw(pos, int(min(1<<20, to-pos)))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.ReadRaw(pos, ra.TotalBytes)
		if err != nil {
			t.Fatal(err)
		}
		if ra.TotalBytes == 0 || !bytes.Equal(ra.Buffers[0], rb.Buffers[0]) {
			t.Fatalf("logs differ at %d", pos)
		}
		pos += int64(ra.TotalBytes)
		ra.Release()
		rb.Release()
	}
}

// TestClusterControlledFailover (in process): a sync-replicated group of
// three elects a master; when it stops, a slave of the sync state set
// takes over, sends succeed again through the SDK's retries, every
// acknowledged message is there exactly once, and the old master comes
// back as a slave with the same log.
func TestClusterControlledFailover(t *testing.T) {
	c := startControlled(t, CtlOptions{Sync: true})
	p := ctlProducer(t, c, 5*time.Second)
	ctx := context.Background()
	var acked []string
	send := func(i int) {
		t.Helper()
		body := fmt.Sprintf("m-%04d", i)
		r, err := p.Send(ctx, &client.Message{Topic: "Fail", Body: []byte(body)})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if r.Status == client.SendOK {
			acked = append(acked, body)
		}
	}
	for i := range 50 {
		send(i)
	}
	waitSyncSet(t, c, 3)
	for i := 50; i < 200; i++ {
		send(i)
	}
	old, _ := c.Master()
	oldID, oldEpoch, _, _ := c.Broker(old).ControllerState()
	stopped := time.Now()
	if err := c.StopBroker(old); err != nil {
		t.Fatal(err)
	}
	nm, err := c.WaitMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	_, epoch, _, set := c.Broker(nm).ControllerState()
	t.Logf("failover to broker %d (epoch %d -> %d) after %v", nm, oldEpoch, epoch, time.Since(stopped))
	if epoch <= oldEpoch || slices.Contains(set, oldID) {
		t.Fatalf("new epoch %d (old %d), sync state set %v", epoch, oldEpoch, set)
	}
	for i := 200; i < 300; i++ {
		send(i)
	}
	if len(acked) < 290 {
		t.Fatalf("only %d of 300 sends acknowledged", len(acked))
	}

	// Every acknowledged message is on the new master once.
	got := readTopic(t, c.Broker(nm), "Fail")
	for _, body := range acked {
		if n := got[body]; n != 1 {
			t.Fatalf("%s found %d times on the new master", body, n)
		}
	}

	// The old master rejoins as a slave and copies the new master's log.
	if err := c.StartBroker(old); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		b := c.Broker(old)
		if _, _, m, _ := b.ControllerState(); m {
			return errors.New("old master acts as master")
		}
		if a, z := b.Store().MaxPhysicalOffset(), c.Broker(nm).Store().MaxPhysicalOffset(); a != z {
			return fmt.Errorf("rejoined at %d, master at %d", a, z)
		}
		return nil
	})
	logsEqual(t, c.Broker(old).Store(), c.Broker(nm).Store())
	waitSyncSet(t, c, 3)
}

// readTopic counts the bodies of every message of a topic on a broker.
func readTopic(t *testing.T, b *broker.Broker, topic string) map[string]int {
	t.Helper()
	s := b.Store()
	out := map[string]int{}
	testutil.Eventually(t, 10*time.Second, func() error {
		if d, m := s.DispatchedPhysicalOffset(), s.MaxPhysicalOffset(); d < m {
			return fmt.Errorf("dispatched %d of %d", d, m)
		}
		return nil
	})
	for _, q := range s.QueueIDs(topic) {
		for off := s.MinOffset(topic, q); off < s.MaxOffset(topic, q); {
			r, err := s.GetMessages(topic, q, off, 64, nil)
			if err != nil || r.Status != store.GetFound {
				t.Fatalf("read %s/%d at %d: %v", topic, q, off, err)
			}
			for _, buf := range r.Buffers {
				m, err := decodeBody(buf)
				if err != nil {
					t.Fatal(err)
				}
				out[m]++
			}
			off = r.NextBeginOffset
			r.Release()
		}
	}
	return out
}

// decodeBody returns the body of a stored record.
func decodeBody(buf []byte) (string, error) {
	m, _, err := record.Decode(buf, true)
	if err != nil {
		return "", err
	}
	return string(m.Body), nil
}

// TestClusterControlledAsyncSends (in process): asynchronous sends made
// while the master stops wait for the new master within their time and
// land there once each.
func TestClusterControlledAsyncSends(t *testing.T) {
	c := startControlled(t, CtlOptions{Sync: true})
	p := ctlProducer(t, c, 3*time.Second)
	ctx := context.Background()
	if _, err := p.Send(ctx, &client.Message{Topic: "Async", Body: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	waitSyncSet(t, c, 3)
	old, _ := c.Master()
	type result struct {
		body string
		ok   bool
	}
	results := make(chan result, 400)
	for i := range 400 {
		body := fmt.Sprintf("a-%04d", i)
		if i == 100 {
			go func() { _ = c.StopBroker(old) }()
		}
		if err := p.SendAsync(ctx, &client.Message{Topic: "Async", Body: []byte(body)}, func(r *client.SendResult, err error) {
			results <- result{body, err == nil && r.Status == client.SendOK}
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var acked []string
	for range 400 {
		select {
		case r := <-results:
			if r.ok {
				acked = append(acked, r.body)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an async send never called back")
		}
	}
	nm, err := c.WaitMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) < 380 {
		t.Fatalf("only %d of 400 async sends acknowledged across the failover", len(acked))
	}
	got := readTopic(t, c.Broker(nm), "Async")
	for _, b := range acked {
		if got[b] != 1 {
			t.Fatalf("%s is %d times on the new master", b, got[b])
		}
	}
}

// TestClusterControlledMasterLeaseReadiness: a controller-mode master
// whose controller replicas are all gone loses its lease and refuses
// every write; it is then not ready, and says why (it used to stay ready),
// and is ready again once a replica confirms it.
func TestClusterControlledMasterLeaseReadiness(t *testing.T) {
	c := startControlled(t, CtlOptions{GroupSize: 1})
	m, ok := c.Master()
	if !ok {
		t.Fatal("no master")
	}
	isNil := func(err error) bool { return err == nil }
	waitErr(t, "master ready", c.Broker(m).Ready, isNil)
	if err := c.StopController(0); err != nil {
		t.Fatal(err)
	}
	waitErr(t, "master without controller", c.Broker(m).Ready, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "not writable: master lost its master lease")
	})
	if err := c.StartController(0); err != nil {
		t.Fatal(err)
	}
	waitErr(t, "master confirmed again", c.Broker(m).Ready, isNil)
}
