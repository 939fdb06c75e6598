package broker

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
)

// The broker's port accepts connections only once its store has
// recovered: while recovery runs, a client is refused at once (and goes
// to another broker) rather than left waiting.
func TestBrokerServesOnlyAfterRecovery(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	c := newTestClient(t, b.Addr())
	c.mustSend("RecTopic", 0, "before", "")
	end := b.Store().MaxPhysicalOffset()
	addr := b.Addr()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Bytes after the end of the log: recovery cuts them and reports it,
	// which is where the test holds it.
	seg := filepath.Join(dir, "commitlog", "00000000000000000000")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1, 2, 3, 4, 5, 6, 7, 8}, end+64); err != nil {
		t.Fatal(err)
	}
	f.Close()

	recovering := make(chan struct{})
	proceed := make(chan struct{})
	var once sync.Once
	type started struct {
		b   *Broker
		err error
	}
	done := make(chan started, 1)
	go func() {
		nb, err := New(testBrokerOptions(dir, func(o *Options) {
			o.ListenAddr = addr
			// Not the listen port + 1: another test may hold that one.
			o.HAListen = "127.0.0.1:0"
			o.Store.Listener = func(ev store.Event) {
				if ev.Kind == store.EventCorruption {
					once.Do(func() {
						close(recovering)
						select {
						case <-proceed:
						case <-time.After(10 * time.Second):
						}
					})
				}
			}
		}))
		done <- started{nb, err}
	}()
	select {
	case <-recovering:
	case s := <-done:
		t.Fatalf("broker started without a recovery event: %v", s.err)
	}
	for range 3 {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			close(proceed)
			t.Fatal("connection accepted while the store recovers")
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial during recovery: %v, want connection refused", err)
		}
	}
	close(proceed)
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { _ = s.b.Close() })
	c2 := newTestClient(t, addr)
	c2.mustSend("RecTopic", 0, "after", "")
	if r := c2.pull("g", "RecTopic", 0, 0, flagSubscription, 0, "*"); r.code != protocol.Success || len(r.msgs) != 2 {
		t.Fatalf("after recovery: code %d, %d messages", r.code, len(r.msgs))
	}
}
