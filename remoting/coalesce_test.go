//go:build linux

package remoting

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"golang.org/x/sys/unix"
)

// batchCounter is an inline processor that records the reader's batch of
// every request (requests read together share Conn.BatchTime).
type batchCounter struct {
	mu      sync.Mutex
	batches map[time.Time]int
	n       int
}

func (b *batchCounter) register(s *Server) {
	b.batches = map[time.Time]int{}
	s.RegisterInline(protocol.SendMessage, PoolSend, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
		at := c.BatchTime()
		b.mu.Lock()
		b.batches[at]++
		b.n++
		b.mu.Unlock()
		return protocol.NewResponse(protocol.Success, ""), nil
	}))
}

func (b *batchCounter) counts() (requests, batches int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, len(b.batches)
}

// A client that pipelines requests one per write, more slowly than the
// server serves them, has them read several at a time once the server's
// reader coalesces; all are answered.
func TestRemotingReadCoalescePipelined(t *testing.T) {
	const n, wait = 400, 20 * time.Millisecond
	var bc batchCounter
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{ReadCoalesce: wait}}, bc.register)
	cl := newClient(t, ClientOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	wg.Add(n)
	for i := 0; i < n; i++ {
		err := cl.InvokeAsync(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, []byte("x")), time.Minute,
			func(resp *protocol.Command, err error) {
				defer wg.Done()
				if err == nil && resp.Code != protocol.Success {
					err = fmt.Errorf("answer %d %q", resp.Code, resp.Remark)
				}
				if err != nil {
					errs <- err
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // one request a write, about 20 per wait
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reqs, batches := bc.counts()
	if reqs != n {
		t.Fatalf("served %d requests, sent %d", reqs, n)
	}
	t.Logf("%d requests in %d reads", reqs, batches)
	if batches > n/4 {
		t.Fatalf("%d requests paced 1 ms apart took %d reads with a %v wait: not coalesced", n, batches, wait)
	}
}

// A client that waits for each answer before its next request is not
// held back: the reader tries a wait now and then (fewer and fewer times),
// finds nothing more, and reads at once again.
func TestRemotingReadCoalesceRequestResponse(t *testing.T) {
	const n, wait = 3000, 200 * time.Millisecond
	var bc batchCounter
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{ReadCoalesce: wait}}, bc.register)
	cl := newClient(t, ClientOptions{})
	slow := 0
	for i := 0; i < n; i++ {
		start := time.Now()
		resp, err := cl.Invoke(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, []byte("x")))
		if err != nil || resp.Code != protocol.Success {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
		if time.Since(start) >= wait {
			slow++
		}
	}
	// Tries come after 16, 32, 64 ... 4,096 batches: about 8 in 3,000.
	t.Logf("%d of %d requests waited a coalescing wait of %v", slow, n, wait)
	if slow > 12 {
		t.Fatalf("%d of %d request-response requests waited %v or more: the reader keeps trying to coalesce", slow, n, wait)
	}
}

// After coalescing, a connection that falls quiet gets its next lone
// request answered at once: the reader blocks only with the socket's
// low-water mark back at one byte.
func TestRemotingReadCoalesceQuietAfterBurst(t *testing.T) {
	const wait = 5 * time.Millisecond
	var bc batchCounter
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{ReadCoalesce: wait}}, bc.register)
	cl := newClient(t, ClientOptions{})
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		wg.Add(100)
		for i := 0; i < 100; i++ {
			if err := cl.InvokeAsync(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, []byte("x")), time.Minute,
				func(*protocol.Command, error) { wg.Done() }); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
		wg.Wait()
		time.Sleep(50 * time.Millisecond) // quiet: the reader's wait finds nothing and it blocks
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		resp, err := cl.Invoke(ctx, addr, protocol.NewRequest(protocol.SendMessage, nil, []byte("lone")))
		cancel()
		if err != nil || resp.Code != protocol.Success {
			t.Fatalf("round %d: a lone request after a burst: %v %v", round, resp, err)
		}
	}
}

// While the reader waits, the socket's low-water mark is a quarter of its
// receive buffer (within bounds): high enough that the segments coming
// meanwhile do not wake the poller, low enough that setting it never
// clamps the window to the mark (the kernel grows the buffer and clamps
// the window when the mark needs more than the buffer holds).
func TestRemotingReadCoalesceMarkFitsBuffer(t *testing.T) {
	for _, tc := range []struct{ rcvbuf, want int }{
		{0, coalesceLowatMin}, {32 << 10, coalesceLowatMin}, {128 << 10, 32 << 10},
		{6 << 20, coalesceLowatMax},
	} {
		if got := coalesceLowat(tc.rcvbuf); got != tc.want {
			t.Errorf("coalesceLowat(%d) = %d, want %d", tc.rcvbuf, got, tc.want)
		}
	}
	const n, wait = 400, 20 * time.Millisecond
	var mu sync.Mutex
	var raised, clamped int
	var last string
	_, addr, _ := startServer(t, Options{ConnOptions: ConnOptions{ReadCoalesce: wait}}, func(s *Server) {
		s.RegisterInline(protocol.SendMessage, PoolSend, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			var lowat, clamp int
			var err error
			if cerr := c.sock.rc.Control(func(fd uintptr) {
				if lowat, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT); err == nil {
					clamp, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP)
				}
			}); cerr != nil || err != nil {
				return nil, fmt.Errorf("socket options: %v %v", cerr, err)
			}
			mu.Lock()
			if lowat >= coalesceLowatMin {
				raised++
			}
			if lowat > 1 && clamp <= lowat {
				clamped++
				last = fmt.Sprintf("mark %d, window clamp %d", lowat, clamp)
			}
			mu.Unlock()
			return protocol.NewResponse(protocol.Success, ""), nil
		}))
	})
	cl := newClient(t, ClientOptions{})
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		if err := cl.InvokeAsync(context.Background(), addr, protocol.NewRequest(protocol.SendMessage, nil, []byte("x")), time.Minute,
			func(*protocol.Command, error) { wg.Done() }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if raised == 0 {
		t.Fatalf("no request was served with the mark raised: the reader never coalesced")
	}
	if clamped > 0 {
		t.Fatalf("%d requests served with the window clamped to the mark (last: %s)", clamped, last)
	}
}
