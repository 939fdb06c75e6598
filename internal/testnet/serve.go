package testnet

import (
	"net"
	"sync"
	"testing"
)

// connGroup owns a test server's connections and goroutines: at the
// test's cleanup every connection is closed and every goroutine waited
// for.
type connGroup struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// track registers c to be closed at cleanup; after cleanup began it
// closes c at once (an accept that raced the listener's close).
func (g *connGroup) track(c net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		_ = c.Close()
		return
	}
	g.conns = append(g.conns, c)
}

// goOwned runs f on a goroutine cleanup waits for.
func (g *connGroup) goOwned(f func()) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
}

func (g *connGroup) closeAll() {
	g.mu.Lock()
	g.closed = true
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.mu.Unlock()
}

// serve listens on addr and hands each accepted connection, tracked, to
// handle on the accepting goroutine (handle starts its own goroutines
// with g.goOwned). It returns the listener's address; the listener and
// the group close at the test's cleanup, which waits for the goroutines.
func serve(t testing.TB, addr string, handle func(g *connGroup, c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := &connGroup{}
	t.Cleanup(func() {
		_ = ln.Close()
		g.closeAll()
		g.wg.Wait()
	})
	g.goOwned(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.track(c)
			handle(g, c)
		}
	})
	return ln.Addr().String()
}
