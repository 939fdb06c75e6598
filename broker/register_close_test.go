package broker

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestRegisterPeerClosingAtOnceBacksOff: a registry address whose peer
// accepts and closes every connection at once (a load balancer with no
// backend, a restarting registry) is retried with the register loop's
// backoff. A close of a connection the broker never registered over must
// not ask for another registration at once: that skipped the backoff and
// dialled (and logged a WARN) in a tight loop.
func TestRegisterPeerClosingAtOnceBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepts atomic.Int64
	first := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepts.Add(1) == 1 {
				close(first)
			}
			_ = c.Close()
		}
	}()
	testBroker(t, t.TempDir(), func(o *Options) {
		o.Registries = []string{ln.Addr().String()}
		o.RegisterInterval = time.Minute
	})
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the broker never dialled its registry")
	}
	// A window, not a wait for a condition: what is measured is how many
	// attempts it holds. The backoff allows those at 1 s and 3 s at most.
	window := 2500 * time.Millisecond
	start := accepts.Load()
	<-time.After(window)
	if n := accepts.Load() - start; n > 4 {
		t.Fatalf("%d registration connections in %v to a peer that closes them: no backoff", n, window)
	}
}
