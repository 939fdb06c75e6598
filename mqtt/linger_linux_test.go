package mqtt

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// lingerLoad runs clients that each send requests to the inline echo
// handler one at a time (response and PUBACK awaited) until stop is
// closed, and returns how many were answered.
func lingerLoad(t *testing.T, addr string, clients int, stop <-chan struct{}) func() int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	payload := strings.Repeat("x", 64)
	for i := range clients {
		r := connected(t, addr, packets.Version5, fmt.Sprintf("linger-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := uint16(1); ; id++ {
				select {
				case <-stop:
					return
				default:
				}
				// Over the SO_RCVLOWAT mark (lowat_linux.go), which
				// the clients' missing PUBACKs do not reach.
				b, err := packets.AppendPacket(nil, inlineRequest(id, 1, payload), packets.Version5)
				if err == nil {
					_, err = r.nc.Write(b)
				}
				for got := 0; err == nil && got < 2; got++ {
					_, err = r.next(10 * time.Second) // the response and the PUBACK
				}
				if err != nil {
					select {
					case <-stop: // the server may be closing
					default:
						t.Errorf("client %d request %d: %v", i, id, err)
					}
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	return func() int {
		wg.Wait()
		return done
	}
}

// TestMQTTPollerLingers: under a steady stream of requests from many
// clients the poller lingers (its rounds paced by the timer, not by each
// arrival) and requests are still answered; when the stream stops it
// parks for arrivals again, and a lone request is answered.
func TestMQTTPollerLingers(t *testing.T) {
	s, _ := inlineServer(t, nil)
	p := s.pollers[0]
	addr := s.Addrs()[0].String()
	stop := make(chan struct{})
	wait := lingerLoad(t, addr, 16, stop)
	testutil.WaitFor(t, 20*time.Second, "the poller lingering", func() bool { return p.lingering.Load() })
	// Requests are served while it lingers (the timer paces its rounds).
	reads0 := s.io.reads.Load()
	testutil.WaitFor(t, 20*time.Second, "1,000 more reads", func() bool { return s.io.reads.Load()-reads0 >= 1000 })
	close(stop)
	if n := wait(); n == 0 {
		t.Fatal("no request answered")
	}
	testutil.WaitFor(t, 10*time.Second, "the poller parked again", func() bool { return !p.lingering.Load() })
	r := connected(t, addr, packets.Version5, "linger-late")
	r.send(inlineRequest(1, 1, "late"))
	if pub := r.expectPublish(); string(pub.Payload) != "late" {
		t.Fatalf("response %q", pub.Payload)
	}
	if a, ok := r.recv().(*packets.Puback); !ok || a.PacketID != 1 {
		t.Fatalf("want PUBACK 1, got %+v", a)
	}
}

// TestMQTTPollerLingerOff: with a negative PollLinger the poller wakes
// for every arrival and never lingers; closing the server while its
// poller lingers ends it.
func TestMQTTPollerLingerOff(t *testing.T) {
	for _, linger := range []time.Duration{-1, 0} {
		t.Run(fmt.Sprint(linger), func(t *testing.T) {
			s, _ := inlineServer(t, nil, func(o *Options) { o.PollLinger = linger })
			stop := make(chan struct{})
			wait := lingerLoad(t, s.Addrs()[0].String(), 16, stop)
			reads0 := s.io.reads.Load()
			testutil.WaitFor(t, 20*time.Second, "1,000 more reads", func() bool { return s.io.reads.Load()-reads0 >= 1000 })
			if linger < 0 {
				if n := s.io.lingers.Load(); n != 0 {
					t.Errorf("lingered %d times with PollLinger %v", n, linger)
				}
				close(stop)
				wait()
				return
			}
			// The default lingers; Close ends the poller meanwhile
			// (the clients stop first, so none reports the close).
			testutil.WaitFor(t, 20*time.Second, "the poller lingering", func() bool { return s.io.lingers.Load() > 0 })
			close(stop)
			s.Close()
			wait()
		})
	}
}

// TestMQTTPollerLingerSingleClient: one client sending requests one
// after the other keeps the poller lingering for few of them. Its rounds
// hold one request each whatever the poller waits, so a linger only adds
// the timer's wait to each; lingers that gather nothing make the next
// one start later and later.
func TestMQTTPollerLingerSingleClient(t *testing.T) {
	s, _ := inlineServer(t, nil)
	stop := make(chan struct{})
	wait := lingerLoad(t, s.Addrs()[0].String(), 1, stop)
	reads0 := s.io.reads.Load()
	testutil.WaitFor(t, 30*time.Second, "800 more reads", func() bool { return s.io.reads.Load()-reads0 >= 800 })
	close(stop)
	n := wait()
	if n == 0 {
		t.Fatal("no request answered")
	}
	// Lingers of 8 rounds, after 1, 2, 4, ... 64 hot wake-ups: about
	// 60 of the first 800 requests.
	if l := s.io.lingered.Load(); l > int64(n)/4 {
		t.Errorf("%d of %d requests served by lingering rounds (%d lingers)", l, n, s.io.lingers.Load())
	}
}

// TestMQTTPollerLingerFollowsQuickClients: a few clients that each send
// their next request as soon as they have the answer come back within
// any linger; waiting the whole of a long one would hold each to one
// request per linger. The wait follows them down instead, and requests
// keep being answered at their pace, not the linger's.
func TestMQTTPollerLingerFollowsQuickClients(t *testing.T) {
	const linger = 50 * time.Millisecond
	s, _ := inlineServer(t, nil, func(o *Options) { o.PollLinger = linger })
	p := s.pollers[0]
	stop := make(chan struct{})
	wait := lingerLoad(t, s.Addrs()[0].String(), 4, stop)
	defer func() {
		close(stop)
		wait()
	}()
	testutil.WaitFor(t, 30*time.Second, "the poller lingering", func() bool { return s.io.lingers.Load() > 0 })
	// Halved after each round of clients that all came back: a quarter
	// of the linger needs two such rounds in a row, which a loaded
	// machine still gives within 50 ms.
	testutil.WaitFor(t, 30*time.Second, "the linger following the clients down", func() bool {
		return time.Duration(p.curLinger.Load()) <= linger/4
	})
	reads0 := s.io.reads.Load()
	testutil.WaitFor(t, 30*time.Second, "1,000 more reads", func() bool { return s.io.reads.Load()-reads0 >= 1000 })
}
