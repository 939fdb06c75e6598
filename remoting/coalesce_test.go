//go:build linux

package remoting

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
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
