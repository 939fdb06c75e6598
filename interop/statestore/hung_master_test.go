package statestore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	sscli "github.com/smartgo/smartgo/client/statestore"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreHungMasterFailover: the master of the state store's broker
// group stops (SIGSTOP: a hung process, or one cut off the network) under
// SET load; the controller elects another, and the bridge's requests go
// to it while the old one is still stopped. A hung master closes no
// connection, and the bridge used to keep sending to it until its next
// periodic route lookup (statestore.route_refresh, set to 10 minutes
// here so that only the fix can explain a recovery): a request that runs
// out of time now has the route looked up again, and requests waiting on
// a replaced master are tried again on the new one. Once the old master
// runs again (and steps down), every acknowledged SET reads back with its
// version.
func TestStateStoreHungMasterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and stops a master")
	}
	c := startFailoverCluster(t, "statestore.route_refresh=10m")
	c.master(t)
	const clients = 4
	var mu sync.Mutex
	acked := map[string]statestore.HLC{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for ci := range clients {
		var cl *sscli.Client
		testutil.WaitFor(t, 60*time.Second, "client connected", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			cl, err = sscli.Dial(ctx, sscli.Options{Addr: c.mqtt, ClientID: fmt.Sprintf("hung-%d", ci)})
			return err == nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("hung-%d-%d", ci, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, ver, err := cl.Set(ctx, []byte(key), []byte(key), sscli.SetOptions{})
				cancel()
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked[key] = ver
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	m := c.master(t)
	before := count()
	testutil.WaitFor(t, 60*time.Second, "SETs before the stop", func() bool { return count() > before+100 })
	if err := c.brokers[m].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	after := count()
	testutil.WaitFor(t, 60*time.Second, "SETs on the new master while the old one is stopped", func() bool { return count() > after+100 })
	t.Logf("SETs succeed again %v after the master stopped", time.Since(stopped).Round(time.Millisecond))
	if err := c.brokers[m].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.master(t)
	close(stop)
	wg.Wait()
	r := dialAt(t, c.mqtt, "hung-reader")
	mu.Lock()
	defer mu.Unlock()
	for key, ver := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, got, ok, err := r.Get(ctx, []byte(key))
		cancel()
		if err != nil || !ok || string(v) != key || got.Compare(ver) != 0 {
			t.Fatalf("%s reads %q version %v (found %v, %v); acknowledged with version %v", key, v, got, ok, err, ver)
		}
	}
	t.Logf("%d acknowledged SETs read back", len(acked))
}

// TestClientSendsReachNewMasterWhileOldHangs: a producer of the Go client
// (the MQTT bridge's ingress) sending while the master of its topic's
// broker group hangs (SIGSTOP) sends to the master the controller elected
// in its place, though the old one closed no connection and the
// producer's periodic route refresh (10 minutes here) is far off: a send
// that got no answer in time has the route refreshed, and the connection
// to the replaced master is closed so that sends waiting on it are tried
// again on the new one. Sends used to fail (timed out) until the next
// periodic refresh (30 s by default; MQTT publishers got PUBACK 0x80 for
// that long).
func TestClientSendsReachNewMasterWhileOldHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and stops a master")
	}
	c := startFailoverCluster(t)
	m := c.master(t)
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{c.reg},
		RouteRefresh: 10 * time.Minute}, Group: "hung-producer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var mu sync.Mutex
	sent, failed := 0, 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// The bridge's kind of send: one queue per key, no retry
			// on another broker.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.SendOrderly(ctx, &client.Message{Topic: "MQTT_INGRESS", Body: []byte(strconv.Itoa(i))}, strconv.Itoa(i%8), client.HashSelector)
			cancel()
			mu.Lock()
			if err == nil {
				sent++
			} else {
				failed++
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	count := func() int { mu.Lock(); defer mu.Unlock(); return sent }
	testutil.WaitFor(t, 60*time.Second, "sends before the stop", func() bool { return count() > 100 })
	if err := c.brokers[m].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	after := count()
	testutil.WaitFor(t, 60*time.Second, "sends to the new master while the old one is stopped", func() bool { return count() > after+100 })
	mu.Lock()
	t.Logf("sends succeed again %v after the master stopped (%d failed meanwhile)", time.Since(stopped).Round(time.Millisecond), failed)
	mu.Unlock()
	if err := c.brokers[m].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// TestClientConsumerFollowsNewMasterWhileOldHangs: a pull consumer whose
// held pulls (PullSuspend, 60 s here) wait on a master that hangs
// (SIGSTOP) reads the messages stored on the master elected in its place
// soon after a producer of the same process found the new master: a
// client that learns a broker's master moved has the process's other
// clients look at their routes, and they close their connections to the
// old master (failing the held pulls, which go again to the new one). The
// consumer used to wait for its pulls to time out (suspend + 18 s) and
// its next periodic route refresh (10 minutes here). Every acknowledged
// message is read in the end.
func TestClientConsumerFollowsNewMasterWhileOldHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and stops a master")
	}
	c := startFailoverCluster(t)
	m := c.master(t)
	copts := client.ClientOptions{Registries: []string{c.reg}, RouteRefresh: 10 * time.Minute}
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: copts, Group: "hung-producer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const topic = "MQTT_INGRESS" // created by the bridge
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{ClientOptions: copts,
		Group: "hung-consumer", From: client.ConsumeFromLast, PullSuspend: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	var qs []client.MessageQueue
	testutil.WaitFor(t, 60*time.Second, "the bridge's topic", func() bool {
		qs, err = pc.Queues(ctx10(t), topic)
		return err == nil
	})
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked, got := map[string]bool{}, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := "hung-" + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := p.SendOrderly(ctx, &client.Message{Topic: topic, Body: []byte(body)}, strconv.Itoa(i%8), client.HashSelector)
			cancel()
			if err == nil {
				mu.Lock()
				acked[body] = true
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			msgs, _ := pc.Poll(ctx)
			cancel()
			mu.Lock()
			for _, x := range msgs {
				got[string(x.Body)] = true
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
	// readAfter counts the messages acknowledged after mark that were read.
	readAfter := func(mark map[string]bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for b := range acked {
			if !mark[b] && got[b] {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 60*time.Second, "messages read before the stop", func() bool { return readAfter(nil) > 100 })
	if err := c.brokers[m].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	mu.Lock()
	before := make(map[string]bool, len(acked))
	for b := range acked {
		before[b] = true
	}
	mu.Unlock()
	testutil.WaitFor(t, 60*time.Second, "messages of the new master read while the old one is stopped", func() bool { return readAfter(before) > 100 })
	t.Logf("messages read again %v after the master stopped", time.Since(stopped).Round(time.Millisecond))
	if err := c.brokers[m].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var missing []string
	testutil.WaitFor(t, 60*time.Second, "every acknowledged message read", func() bool {
		mu.Lock()
		defer mu.Unlock()
		missing = missing[:0]
		for b := range acked {
			if !got[b] {
				missing = append(missing, b)
			}
		}
		return len(missing) == 0
	})
}

// TestTwinClientFollowsNewMasterWhileOldHangs: the twin client (the IoT
// Hub front's and the back end's) sends to the master the controller
// elected while the old one hangs (SIGSTOP): a request that runs out of
// time has the route looked up again (the periodic lookup is 10 minutes
// away here), and the connection to a replaced master is closed. Twin
// updates used to time out until the next periodic lookup (30 s).
func TestTwinClientFollowsNewMasterWhileOldHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and stops a master")
	}
	c := startFailoverCluster(t)
	m := c.master(t)
	tc, err := twincli.New(twincli.Options{Registries: []string{c.reg}, RouteRefresh: 10 * time.Minute, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Close() })
	const devices = 8
	for d := range devices {
		testutil.WaitFor(t, 60*time.Second, "device created", func() bool {
			_, err := tc.PutDevice(ctx10(t), &twincli.Device{DeviceID: "hung-dev-" + strconv.Itoa(d)}, twincli.PutUpsert, "")
			return err == nil
		})
	}
	var mu sync.Mutex
	done := 0
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := tc.UpdateDesired(context.Background(), "hung-dev-"+strconv.Itoa(i%devices), "", []byte(`{"n":`+strconv.Itoa(i)+`}`), 0)
			if err == nil {
				mu.Lock()
				done++
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-finished })
	count := func() int { mu.Lock(); defer mu.Unlock(); return done }
	testutil.WaitFor(t, 60*time.Second, "updates before the stop", func() bool { return count() > 100 })
	if err := c.brokers[m].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	after := count()
	testutil.WaitFor(t, 60*time.Second, "updates on the new master while the old one is stopped", func() bool { return count() > after+100 })
	t.Logf("twin updates succeed again %v after the master stopped", time.Since(stopped).Round(time.Millisecond))
	if err := c.brokers[m].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}
