package remoting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

const (
	codeNeverAnswered int32 = 9101
	codeToClient      int32 = 9102
)

// pendingCalls reports how many calls of a connection wait for their
// responses.
func pendingCalls(cn *Conn) int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.pending)
}

// Sync callers, calls that time out, async calls and server requests
// to the client all mix on one connection; afterwards nothing is left
// pending and the connection still serves.
func TestRemotingMixedLoad(t *testing.T) {
	var serverConn atomic.Pointer[Conn]
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterInline(codeEcho, PoolDefault, ProcessorFunc(echo))
		s.RegisterFunc(codeNeverAnswered, PoolPull, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			serverConn.Store(c)
			return nil, nil
		})
	})
	c := newClient(t, ClientOptions{})
	c.RegisterFunc(codeToClient, func(cn *Conn, req *protocol.Command) (*protocol.Command, error) {
		resp := protocol.NewResponse(protocol.Success, "")
		resp.ExtFields = protocol.ExtFields{"v": req.ExtFields["v"]}
		return resp, nil
	})
	// Connect first (a dial under load may take longer than the short
	// timeout below), then learn the server side of the connection.
	ctxDial, cancelDial := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := c.Invoke(ctxDial, addr, protocol.NewRequest(codeEcho, nil, nil)); err != nil {
		t.Fatal(err)
	}
	cancelDial()
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	if _, err := c.Invoke(ctx0, addr, protocol.NewRequest(codeNeverAnswered, nil, nil)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want timeout, got %v", err)
	}
	cancel0()
	// The request may still wait for a worker when the client gives up.
	testutil.WaitFor(t, 10*time.Second, "the server to run the request", func() bool { return serverConn.Load() != nil })
	sc := serverConn.Load()

	const goroutines, ops = 16, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*ops+64)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < ops; i++ {
				v := fmt.Sprintf("%d-%d", g, i)
				switch i % 6 {
				case 3: // times out (short deadline)
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i%3)*time.Millisecond)
					_, err := c.Invoke(ctx, addr, protocol.NewRequest(codeNeverAnswered, nil, nil))
					cancel()
					if !errors.Is(err, ErrTimeout) {
						errs <- fmt.Errorf("timeout call: %v", err)
					}
				case 4: // cancelled
					ctx, cancel := context.WithCancel(context.Background())
					time.AfterFunc(time.Millisecond, cancel)
					_, err := c.Invoke(ctx, addr, protocol.NewRequest(codeNeverAnswered, nil, nil))
					cancel()
					if !errors.Is(err, context.Canceled) {
						errs <- fmt.Errorf("cancelled call: %v", err)
					}
				case 5: // async
					got := make(chan error, 1)
					err := c.InvokeAsync(context.Background(), addr, echoReq(v, nil), time.Second, func(resp *protocol.Command, err error) {
						if err == nil && resp.ExtFields["v"] != v {
							err = fmt.Errorf("async %s got %q", v, resp.ExtFields["v"])
						}
						got <- err
					})
					if err == nil {
						err = <-got
					}
					if err != nil {
						errs <- err
					}
				default:
					resp, err := c.Invoke(context.Background(), addr, echoReq(v, []byte(v)))
					if err == nil && (resp.ExtFields["v"] != v || string(resp.Body) != v) {
						err = fmt.Errorf("call %s got %q %q", v, resp.ExtFields["v"], resp.Body)
					}
					if err != nil {
						errs <- err
					}
				}
			}
		}(g)
	}
	// Meanwhile the server calls the client on the same connection.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			v := fmt.Sprintf("s%d", i)
			r := protocol.NewRequest(codeToClient, nil, nil)
			r.ExtFields = protocol.ExtFields{"v": v}
			resp, err := sc.Invoke(context.Background(), r)
			if err == nil && resp.ExtFields["v"] != v {
				err = fmt.Errorf("server->client %s got %q", v, resp.ExtFields["v"])
			}
			if err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d failed operations", n)
	}
	cn, err := c.Conn(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "no pending calls", func() bool {
		return pendingCalls(cn) == 0
	})
	if _, err := c.Invoke(context.Background(), addr, echoReq("last", nil)); err != nil {
		t.Fatal(err)
	}
}

// A caller notices its context's cancellation and deadline at once, not
// at RequestTimeout.
func TestRemotingCallerCancel(t *testing.T) {
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterFunc(codeNeverAnswered, PoolPull, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			return nil, nil
		})
	})
	c := newClient(t, ClientOptions{ConnOptions: ConnOptions{RequestTimeout: 20 * time.Second}})
	if _, err := c.Invoke(context.Background(), addr, echoReq("warm", nil)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.Invoke(ctx, addr, protocol.NewRequest(codeNeverAnswered, nil, nil))
		// Well before the 20 s request timeout; loose enough for a stall.
		if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
			t.Fatalf("cancel: %v after %v", err, time.Since(start))
		}
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
		start = time.Now()
		_, err = c.Invoke(ctx, addr, protocol.NewRequest(codeNeverAnswered, nil, nil))
		cancel()
		if !errors.Is(err, ErrTimeout) || time.Since(start) > 10*time.Second {
			t.Fatalf("deadline: %v after %v", err, time.Since(start))
		}
		// The connection still serves the next call.
		if _, err := c.Invoke(context.Background(), addr, echoReq("next", nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// Between calls the client's reader still answers server requests and
// sees the peer's close.
func TestRemotingIdleClientServesServer(t *testing.T) {
	var serverConn atomic.Pointer[Conn]
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.OnConnOpen(func(c *Conn) { serverConn.Store(c) })
	})
	c := newClient(t, ClientOptions{})
	c.RegisterFunc(codeToClient, func(cn *Conn, req *protocol.Command) (*protocol.Command, error) {
		return protocol.NewResponse(protocol.Success, "client"), nil
	})
	for i := 0; i < 20; i++ {
		if _, err := c.Invoke(context.Background(), addr, echoReq("x", nil)); err != nil {
			t.Fatal(err)
		}
		// Right after a call the server's request is answered too.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := serverConn.Load().Invoke(ctx, protocol.NewRequest(codeToClient, nil, nil))
		cancel()
		if err != nil || resp.Remark != "client" {
			t.Fatalf("round %d: server->client: %v %v", i, resp, err)
		}
	}
	if _, err := c.Invoke(context.Background(), addr, echoReq("x", nil)); err != nil {
		t.Fatal(err)
	}
	cn, err := c.Conn(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	serverConn.Load().Close()
	select {
	case <-cn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client did not notice the server closing")
	}
}
