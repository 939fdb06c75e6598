package mqtt

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestMQTTStressSubscribeAck reproduces the engine's cause of "SUBSCRIBE
// without SUBACK" (for the client's cause see
// TestMQTTSubscribeWithSplicedPingreq). It models the state store front
// under a shard stall: paho v5
// clients dial at once (CONNECT, SUBSCRIBE to their response topic, then
// a request PUBLISH to a Handler, as the state store client does) while
// every handler call blocks until the stall ends, on a loaded machine (CPU
// spinners with allocation churn). A SUBSCRIBE needs no handler, so every
// SUBACK must arrive within 5 s (the stall outlasts that). On the old
// worker pool a task submitted just after the only idle worker had been
// signalled (and before it woke) got no worker of its own and waited
// behind a blocked request. SMARTGO_STRESS_ROUNDS raises the rounds
// (default 3) for a soak run:
//
//	SMARTGO_STRESS_ROUNDS=50 go test ./mqtt -run TestMQTTStressSubscribeAck -race -cpu 1,2,4 -count 3
func TestMQTTStressSubscribeAck(t *testing.T) {
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_STRESS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const clients = 64
	ts := startServer(t, nil)
	var stallMu sync.Mutex
	stall := make(chan struct{})
	close(stall)
	ts.Handle("stress/req", func(ctx context.Context, from ClientInfo, msg *Message) error {
		stallMu.Lock()
		s := stall
		stallMu.Unlock()
		select {
		case <-s:
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	stop := make(chan struct{})
	var bg sync.WaitGroup
	defer func() { close(stop); bg.Wait() }()
	for range runtime.GOMAXPROCS(0) + 1 { // CPU load with GC pressure
		bg.Add(1)
		go func() {
			defer bg.Done()
			var sink []byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sink = make([]byte, 4096)
				sink[0] = byte(i)
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	for r := range rounds {
		stallMu.Lock()
		stall = make(chan struct{})
		gate := stall
		stallMu.Unlock()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		pcs := make(chan *paho.Client, clients)
		var worst time.Duration
		var wmu sync.Mutex
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, took, err := stressClient(ts.addr, fmt.Sprintf("stress-%d-%d", r, i))
				if c != nil {
					pcs <- c
				}
				if err != nil {
					errs <- err
				}
				wmu.Lock()
				worst = max(worst, took)
				wmu.Unlock()
			}()
		}
		wg.Wait()
		dump := dumpServer(ts.Server)
		close(gate) // the stall ends
		close(pcs)
		for c := range pcs {
			c.Disconnect(&paho.Disconnect{})
		}
		close(errs)
		n := 0
		for err := range errs {
			t.Errorf("round %d: %v", r, err)
			n++
		}
		if n > 0 {
			t.Fatalf("round %d: %d of %d clients got no SUBACK in 5 s\n%s", r, n, clients, dump)
		}
		t.Logf("round %d: slowest SUBACK %v", r, worst.Round(time.Millisecond))
	}
}

// stressClient connects a paho v5 client, subscribes (5 s for the SUBACK)
// and sends one request to the stalled handler. It returns how long the
// SUBACK took.
func stressClient(addr, id string) (*paho.Client, time.Duration, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(paho.PublishReceived) (bool, error) { return true, nil }}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := c.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30})
	if err != nil || ack.ReasonCode != 0 {
		nc.Close()
		return nil, 0, fmt.Errorf("%s: connect: %v", id, err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	t0 := time.Now()
	sa, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
		{Topic: "clients/" + id + "/response", QoS: 1, NoLocal: true}}})
	took := time.Since(t0)
	if err != nil || len(sa.Reasons) != 1 {
		return c, took, fmt.Errorf("%s: subscribe after %v: %v", id, took.Round(time.Millisecond), err)
	}
	if _, err := c.Publish(sctx, &paho.Publish{Topic: "stress/req", Payload: []byte("GET k")}); err != nil {
		return c, took, fmt.Errorf("%s: request: %v", id, err)
	}
	return c, took, nil
}

// TestMQTTSubscribeWithSplicedPingreq pins the server's side of the other
// "no SUBACK" cause, found with the state store client: paho.golang writes
// a packet as several buffers (header, then body parts) and its pinger
// sends a PINGREQ at once after CONNACK; over a net.Conn wrapper (the
// client's read-buffering bufConn) neither writev nor paho's lock applies,
// so the PINGREQ can land inside the SUBSCRIBE. These are the bytes one
// such run delivered. The server must answer with DISCONNECT 0x81
// malformed packet, close, and log the client, rather than wait.
func TestMQTTSubscribeWithSplicedPingreq(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	r.connect(&packets.Connect{ClientID: "watcher", CleanStart: true, KeepAlive: 30})
	filter := "clients/watcher/services/statestore/_any_/command/invoke/response"
	b := []byte{0x82, 0x47, 0x00, 0x01, 0x00} // SUBSCRIBE: header, packet id 1, no properties
	b = append(b, 0xC0, 0x00)                 // PINGREQ, written by the pinger in between
	b = append(b, 0x00, byte(len(filter)))
	b = append(b, filter...)
	b = append(b, 0x05) // QoS 1, no local
	r.sendBytes(b)
	if code := r.closed(); code != int(packets.ReasonMalformedPacket) {
		t.Fatalf("got DISCONNECT %d, want 0x81", code)
	}
	testutil.WaitFor(t, 5*time.Second, "log line", func() bool {
		l := ts.logs.String()
		return strings.Contains(l, "client=watcher") && strings.Contains(l, "malformed")
	})
}

// dumpServer describes the pool and every connection with work pending,
// for a failure message.
func dumpServer(s *Server) string {
	s.pool.mu.Lock()
	out := fmt.Sprintf("pool: queued %d running %d idle %d\n", len(s.pool.queue), s.pool.running, s.pool.idle)
	s.pool.mu.Unlock()
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.inMu.Lock()
		in, sched, paused, eof := len(c.in), c.scheduled, c.paused, c.eof
		c.inMu.Unlock()
		c.ackMu.Lock()
		acks, parked := len(c.acks), c.parked
		c.ackMu.Unlock()
		if in > 0 || paused || eof || acks > 0 || parked || c.outLen() > 0 {
			out += fmt.Sprintf("conn %s %s: in %d scheduled %v paused %v eof %v acks %d parked %v out %d\n",
				c.clientID(), c.remote, in, sched, paused, eof, acks, parked, c.outLen())
		}
	}
	return out
}
