package remoting

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Pool processors run on workers, never on the reader, so one that blocks
// leaves its connection read: the requests behind it on the same
// connection, for the same pool and another, are still served.
func TestRemotingPoolBlockedProcessorKeepsReading(t *testing.T) {
	const codeBlock int32 = 9201
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	started := make(chan bool, 1)
	_, addr, _ := startServer(t, Options{SendPool: PoolOptions{Workers: 4, QueueSize: 16}}, func(s *Server) {
		s.RegisterFunc(codeBlock, PoolSend, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			if string(req.Body) == "block" {
				started <- onReader()
				<-release
			}
			resp := protocol.NewResponse(protocol.Success, "")
			if onReader() {
				resp.Remark = "reader"
			}
			return resp, nil
		})
	})
	t.Cleanup(unblock) // before the server's Close, which waits for the processor
	c := newClient(t, ClientOptions{})
	if resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(codeBlock, nil, []byte("x"))); err != nil || resp.Remark == "reader" {
		t.Fatalf("a pool processor ran on the reader: %v %v", resp, err)
	}
	done := make(chan *protocol.Command, 1)
	if err := c.InvokeAsync(context.Background(), addr, protocol.NewRequest(codeBlock, nil, []byte("block")), 10*time.Second,
		func(resp *protocol.Command, err error) { done <- resp }); err != nil {
		t.Fatal(err)
	}
	if <-started {
		t.Fatal("the blocking request ran on the reader")
	}
	// Same connection, same pool and another pool: both answered while the
	// first processor blocks.
	for _, code := range []int32{codeBlock, codeEcho} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Invoke(ctx, addr, protocol.NewRequest(code, nil, []byte("x")))
		cancel()
		if err != nil || resp.Code != protocol.Success {
			t.Fatalf("code %d behind a blocked processor: %v %v", code, resp, err)
		}
	}
	unblock()
	if r := <-done; r == nil || r.Code != protocol.Success {
		t.Fatalf("blocked request: %v", r)
	}
}

// A processor that waits for a response from the peer on its own
// connection gets it: the reader keeps reading while a worker waits.
func TestRemotingPoolProcessorCallsPeer(t *testing.T) {
	const codeAsk int32 = 9202
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(codeAsk, PoolDefault, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			peer, err := c.Invoke(ctx, protocol.NewRequest(codeToClient, nil, nil))
			if err != nil {
				return nil, err
			}
			return protocol.NewResponse(protocol.Success, "peer said "+peer.Remark), nil
		})
	})
	c := newClient(t, ClientOptions{})
	c.RegisterFunc(codeToClient, func(cn *Conn, req *protocol.Command) (*protocol.Command, error) {
		return protocol.NewResponse(protocol.Success, "hi"), nil
	})
	for i := 0; i < 3; i++ {
		resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(codeAsk, nil, nil))
		if err != nil || resp.Code != protocol.Success || resp.Remark != "peer said hi" {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
	}
}

// No more than Workers requests of a pool run at once, from however many
// connections, and all are answered.
func TestRemotingPoolBound(t *testing.T) {
	const codeSlow int32 = 9203
	var running, most atomic.Int32
	_, addr, _ := startServer(t, Options{SendPool: PoolOptions{Workers: 2, QueueSize: 1000}}, func(s *Server) {
		s.RegisterFunc(codeSlow, PoolSend, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			if req.Body[0]%4 == 0 {
				time.Sleep(3 * time.Millisecond) // others queue meanwhile
			}
			running.Add(-1)
			return protocol.NewResponse(protocol.Success, ""), nil
		})
	})
	const clients, calls = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients*calls)
	for i := 0; i < clients; i++ {
		c := newClient(t, ClientOptions{})
		for g := 0; g < 2; g++ { // two callers per connection
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < calls; k++ {
					resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(codeSlow, nil, []byte{byte(k)}))
					if err == nil && resp.Code != protocol.Success {
						err = fmt.Errorf("code %d %s", resp.Code, resp.Remark)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := most.Load(); m > 2 || m < 1 {
		t.Fatalf("%d processors of a 2-worker pool ran at once", m)
	}
}

// Requests pipelined on one connection to a one-worker pool run in the
// order they arrived, whether they found the worker idle or waited in the
// queue.
func TestRemotingPoolOrder(t *testing.T) {
	const codeOrder int32 = 9204
	var mu sync.Mutex
	var order []int
	_, addr, _ := startServer(t, Options{SendPool: PoolOptions{Workers: 1, QueueSize: 1000}}, func(s *Server) {
		s.RegisterFunc(codeOrder, PoolSend, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			i, _ := strconv.Atoi(string(req.Body))
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if i%25 == 0 {
				time.Sleep(3 * time.Millisecond) // later ones queue
			} else {
				runtime.Gosched() // a window between a worker's tasks
			}
			return protocol.NewResponse(protocol.Success, ""), nil
		})
	})
	r := dialRaw(t, addr)
	const n = 300
	for i := 1; i <= n; i++ {
		req := protocol.NewRequest(codeOrder, nil, []byte(strconv.Itoa(i)))
		req.Opaque = int32(i)
		r.send(req)
		if i%10 == 0 {
			time.Sleep(200 * time.Microsecond) // arrive in several batches
		}
	}
	for i := 1; i <= n; i++ {
		resp, err := r.read()
		if err != nil || resp.Code != protocol.Success {
			t.Fatalf("response %d: %v %v", i, resp, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, v := range order {
		if v != i+1 {
			t.Fatalf("request %d ran as number %d: %v", v, i+1, order)
		}
	}
	if len(order) != n {
		t.Fatalf("ran %d of %d", len(order), n)
	}
}
