package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

func TestStateStoreOptions(t *testing.T) {
	if err := (&Options{}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty router options: %v", err)
	}
}

// TestStateStoreRouterShardsAndRetry routes over a fixed table of two
// fake brokers (real remoting servers) and checks the shard mapping, the
// error mapping and DropClient.
func TestStateStoreRouterShardsAndRetry(t *testing.T) {
	type seen struct {
		name  string
		shard int32
	}
	got := make(chan seen, 16)
	start := func(name string, code int32) string {
		srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		srv.RegisterFunc(protocol.StateStoreInvoke, remoting.PoolSend, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
			r, err := protocol.DecodeStateStoreRequest(req)
			if err != nil {
				return protocol.NewResponse(protocol.SystemError, err.Error()), nil
			}
			got <- seen{name, r.Shard}
			resp := protocol.NewResponse(code, "x")
			resp.Body = (&protocol.StateStoreResponse{Reply: []byte("+OK\r\n")}).AppendBody(nil)
			return resp, nil
		})
		srv.RegisterFunc(protocol.StateStoreDropClient, remoting.PoolDefault, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
			got <- seen{name + "/drop:" + req.ExtFields["clientId"], -1}
			return protocol.NewResponse(protocol.Success, ""), nil
		})
		return listenServe(t, srv)
	}
	a, b := start("a", protocol.Success), start("b", protocol.SystemError)
	r, err := New(Options{Brokers: map[string]string{"a": a, "b": b}, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, _ := r.Shards(ctx); n != 4 {
		t.Fatalf("shards %d", n)
	}
	// Find keys for a and for b: global shards 0,1 are a's, 2,3 b's.
	var onA, onB []byte
	for i := 0; onA == nil || onB == nil; i++ {
		k := []byte{byte('a' + i%26), byte(i / 26)}
		resp, err := r.Invoke(ctx, k, &protocol.StateStoreRequest{ClientID: "c", Payload: []byte("p")})
		s := <-got
		switch {
		case s.name == "a" && err == nil && string(resp.Reply) == "+OK\r\n":
			onA = k
		case s.name == "b" && errors.Is(err, ErrFailed):
			onB = k
		default:
			t.Fatalf("key %q: broker %s shard %d err %v", k, s.name, s.shard, err)
		}
		if s.shard < 0 || s.shard > 1 {
			t.Fatalf("local shard %d", s.shard)
		}
	}
	if err := r.DropClient(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	drops := map[string]bool{}
	for i := 0; i < 2; i++ {
		drops[(<-got).name] = true
	}
	if !drops["a/drop:gone"] || !drops["b/drop:gone"] {
		t.Fatalf("drops %v", drops)
	}
	_ = r.Close()
	if _, err := r.Invoke(ctx, onA, &protocol.StateStoreRequest{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// fakeLocal is a LocalBroker recording its calls.
type fakeLocal struct {
	mu     sync.Mutex
	calls  []int32 // shards invoked
	sinks  []protocol.StateStoreSink
	cmds   []*statestore.Command
	drops  []string
	answer func() (*protocol.StateStoreResponse, error)
	waits  func(*statestore.Command) bool // nil: never waits
}

func (f *fakeLocal) InvokeLocal(_ context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) error {
	f.mu.Lock()
	f.calls = append(f.calls, req.Shard)
	f.sinks = append(f.sinks, sink)
	f.cmds = append(f.cmds, cmd)
	f.mu.Unlock()
	out, err := f.answer()
	if err == nil {
		*resp = *out
	}
	return err
}

func (f *fakeLocal) Waits(cmd *statestore.Command) bool { return f.waits != nil && f.waits(cmd) }

func (f *fakeLocal) DropClient(id string, _ protocol.StateStoreSink) int {
	f.mu.Lock()
	f.drops = append(f.drops, id)
	f.mu.Unlock()
	return 0
}

// TestStateStoreRouterLocal routes over a table of one remote broker and
// one in-process broker (Options.Local): the local broker's shards
// are called directly with the router as the sink, its errors map like
// the remote path's (unavailable: retried once; anything else: failed),
// a passed deadline is refused without a call, DropClient reaches both,
// and a pushed notification reaches OnNotify.
func TestStateStoreRouterLocal(t *testing.T) {
	srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	remoteCalls := make(chan int32, 16)
	srv.RegisterFunc(protocol.StateStoreInvoke, remoting.PoolSend, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		r, _ := protocol.DecodeStateStoreRequest(req)
		remoteCalls <- r.Shard
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = (&protocol.StateStoreResponse{Reply: []byte("+remote\r\n")}).AppendBody(nil)
		return resp, nil
	})
	srv.RegisterFunc(protocol.StateStoreDropClient, remoting.PoolDefault, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		return protocol.NewResponse(protocol.Success, ""), nil
	})
	addr := listenServe(t, srv)
	loc := &fakeLocal{answer: func() (*protocol.StateStoreResponse, error) {
		return &protocol.StateStoreResponse{Reply: []byte("+local\r\n")}, nil
	}}
	notified := make(chan []protocol.StateStoreNotification, 1)
	r, err := New(Options{Brokers: map[string]string{"a": addr, "b": "in-process:1"}, Shards: 2,
		Local: map[string]LocalBroker{"in-process:1": loc}, OnNotify: func(ns []protocol.StateStoreNotification) { notified <- ns }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Global shards 0,1 are a's (remote), 2,3 b's (local).
	var onLocal []byte
	for i := 0; i < 64; i++ {
		k := []byte{byte('a' + i%26), byte(i / 26)}
		resp, err := r.Invoke(ctx, k, &protocol.StateStoreRequest{ClientID: "c", Payload: []byte("p")})
		if err != nil {
			t.Fatal(err)
		}
		switch string(resp.Reply) {
		case "+remote\r\n":
			if s := <-remoteCalls; s < 0 || s > 1 {
				t.Fatalf("remote shard %d", s)
			}
		case "+local\r\n":
			onLocal = k
		default:
			t.Fatalf("reply %q", resp.Reply)
		}
	}
	loc.mu.Lock()
	calls, sinks := loc.calls, loc.sinks
	loc.sinks = nil
	loc.mu.Unlock()
	if onLocal == nil || len(calls) == 0 {
		t.Fatal("no key was served by the local broker")
	}
	for i, s := range calls {
		if s < 0 || s > 1 || sinks[i] != protocol.StateStoreSink(r) {
			t.Fatalf("local call shard %d sink %v", s, sinks[i])
		}
	}
	// A parsed command picks the shard of its key and reaches the local
	// broker as it is (parsed once).
	cmd, err := statestore.ParseCommand(statestore.AppendRequest(nil, []byte("GET"), onLocal))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := r.InvokeCommand(ctx, time.Time{}, &cmd, &protocol.StateStoreRequest{}); err != nil || string(resp.Reply) != "+local\r\n" {
		t.Fatalf("invoke command: %v %v", resp, err)
	}
	loc.mu.Lock()
	if len(loc.cmds) != len(calls)+1 || loc.cmds[len(loc.cmds)-1] != &cmd || loc.cmds[0] != nil {
		t.Fatalf("commands passed to the local broker: %v", loc.cmds)
	}
	loc.calls, loc.cmds = nil, nil
	loc.mu.Unlock()
	// InvokeCommandNow serves the local shard at once and leaves a remote
	// one (and a local refusal) to InvokeCommandAsync, touching nothing.
	var resp protocol.StateStoreResponse
	if ok, err := r.InvokeCommandNow(ctx, time.Time{}, time.Time{}, &cmd, &protocol.StateStoreRequest{}, &resp); !ok || err != nil || string(resp.Reply) != "+local\r\n" {
		t.Fatalf("now, local: %v %v %v", resp, ok, err)
	}
	// The deadline is judged by the caller's clock reading (a poller
	// round's), not by the clock: a request whose deadline passed on the
	// clock but not as of the reading is served; one whose deadline is
	// the reading is refused without calling the broker.
	loc.mu.Lock()
	loc.calls = nil
	loc.mu.Unlock()
	past := time.Now().Add(-time.Hour)
	if ok, err := r.InvokeCommandNow(ctx, past.Add(-time.Second), past, &cmd, &protocol.StateStoreRequest{}, &resp); !ok || err != nil || string(resp.Reply) != "+local\r\n" {
		t.Fatalf("now, deadline after the caller's reading: %v %v %v", resp, ok, err)
	}
	if ok, err := r.InvokeCommandNow(ctx, past, past, &cmd, &protocol.StateStoreRequest{}, &resp); !ok || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("now, deadline at the caller's reading: served %v %v", ok, err)
	}
	loc.mu.Lock()
	if len(loc.calls) != 1 {
		t.Fatalf("local broker called %d times, want once (the expired request is not served)", len(loc.calls))
	}
	loc.mu.Unlock()
	// A local request that would wait (LocalBroker.Waits) is left to
	// InvokeCommandAsync as well, and the broker is not called.
	loc.mu.Lock()
	loc.calls = nil
	loc.mu.Unlock()
	loc.waits = func(c *statestore.Command) bool { return c == &cmd }
	if ok, err := r.InvokeCommandNow(ctx, time.Time{}, time.Time{}, &cmd, &protocol.StateStoreRequest{}, &resp); ok || err != nil {
		t.Fatalf("now, local request that waits: served %v %v", ok, err)
	}
	loc.mu.Lock()
	if len(loc.calls) != 0 {
		t.Fatalf("InvokeCommandNow called the local broker for a request that waits: %v", loc.calls)
	}
	loc.mu.Unlock()
	loc.waits = nil
	var onRemote *statestore.Command
	for i := 0; onRemote == nil; i++ {
		if k := []byte{byte('a' + i%26), byte(i / 26)}; statestore.ShardOf(k, 4) < 2 {
			onRemote = &statestore.Command{Verb: statestore.VerbGet, Key: k}
		}
	}
	if ok, err := r.InvokeCommandNow(ctx, time.Time{}, time.Time{}, onRemote, &protocol.StateStoreRequest{}, &resp); ok || err != nil {
		t.Fatalf("now, remote: served %v %v", ok, err)
	}
	select {
	case s := <-remoteCalls:
		t.Fatalf("InvokeCommandNow sent shard %d to the remote broker", s)
	default:
	}
	loc.mu.Lock()
	loc.calls, loc.cmds = nil, nil
	loc.mu.Unlock()
	loc.answer = func() (*protocol.StateStoreResponse, error) { return nil, fmt.Errorf("%w: test", ErrUnavailable) }
	if ok, err := r.InvokeCommandNow(ctx, time.Time{}, time.Time{}, &cmd, &protocol.StateStoreRequest{}, &resp); ok || err != nil {
		t.Fatalf("now, local refusal: served %v %v", ok, err)
	}
	loc.mu.Lock()
	loc.calls, loc.cmds = nil, nil
	loc.mu.Unlock()
	if _, err := r.Invoke(ctx, onLocal, &protocol.StateStoreRequest{}); !errors.Is(err, ErrUnavailable) || len(loc.calls) != 2 {
		t.Fatalf("unavailable: %v after %d calls (want a retry)", err, len(loc.calls))
	}
	loc.answer = func() (*protocol.StateStoreResponse, error) { return nil, errors.New("boom") }
	if _, err := r.Invoke(ctx, onLocal, &protocol.StateStoreRequest{}); !errors.Is(err, ErrFailed) || len(loc.calls) != 3 {
		t.Fatalf("other error: %v after %d calls", err, len(loc.calls))
	}
	if _, err := r.InvokeBefore(ctx, time.Now().Add(-time.Millisecond), onLocal, &protocol.StateStoreRequest{}); !errors.Is(err, ErrUnavailable) || len(loc.calls) != 3 {
		t.Fatalf("past deadline: %v after %d calls", err, len(loc.calls))
	}
	if err := r.DropClient(ctx, "gone"); err != nil || len(loc.drops) != 1 || loc.drops[0] != "gone" {
		t.Fatalf("drop client: %v %v", err, loc.drops)
	}
	r.PushStateStoreNotifications([]protocol.StateStoreNotification{{ClientID: "w", Key: []byte("k"), Op: 1}})
	select {
	case ns := <-notified:
		if len(ns) != 1 || ns[0].ClientID != "w" {
			t.Fatalf("notified %+v", ns)
		}
	default:
		t.Fatal("pushed notification did not reach OnNotify")
	}
}

// TestStateStoreRouterInvokeAsync: InvokeCommandAsync returns while the
// remote broker still holds the request and delivers the answer through
// the callback once; a broker refusing the first attempt gets the second
// (the retry of InvokeCommand); a request past its deadline and one after
// Close are answered at once with their errors.
func TestStateStoreRouterInvokeAsync(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	start := func(serve func(n int32) int32) string {
		srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		srv.RegisterFunc(protocol.StateStoreInvoke, remoting.PoolSend, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
			resp := protocol.NewResponse(serve(calls.Add(1)), "busy")
			resp.Body = (&protocol.StateStoreResponse{Reply: []byte("+OK\r\n")}).AppendBody(nil)
			return resp, nil
		})
		return listenServe(t, srv)
	}
	a := start(func(int32) int32 { <-release; return protocol.Success })
	b := start(func(n int32) int32 {
		if n == 2 { // b's first call (a's was 1)
			return protocol.ServiceNotAvailable
		}
		return protocol.Success
	})
	r, err := New(Options{Brokers: map[string]string{"a": a, "b": b}, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	keyOn := func(shard int) *statestore.Command {
		for i := 0; ; i++ {
			k := []byte{byte('a' + i%26), byte(i / 26)}
			if statestore.ShardOf(k, 2) == shard {
				return &statestore.Command{Verb: statestore.VerbGet, Key: k}
			}
		}
	}
	type result struct {
		resp *protocol.StateStoreResponse
		err  error
	}
	invoke := func(cmd *statestore.Command, deadline time.Time) chan result {
		ch := make(chan result, 2) // a second callback would be caught below
		r.InvokeCommandAsync(context.Background(), deadline, cmd, &protocol.StateStoreRequest{ClientID: "c", Payload: []byte("p")},
			func(resp *protocol.StateStoreResponse, err error) { ch <- result{resp, err} })
		return ch
	}
	wait := func(ch chan result) result {
		t.Helper()
		select {
		case res := <-ch:
			select {
			case extra := <-ch:
				t.Fatalf("callback called twice: %+v", extra)
			case <-time.After(20 * time.Millisecond):
			}
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
			return result{}
		}
	}
	held := invoke(keyOn(0), time.Now().Add(10*time.Second))
	testutil.WaitFor(t, 10*time.Second, "broker a holds the request", func() bool { return calls.Load() == 1 })
	select {
	case res := <-held:
		t.Fatalf("answered while the broker holds the request: %+v", res)
	default:
	}
	close(release)
	if res := wait(held); res.err != nil || string(res.resp.Reply) != "+OK\r\n" {
		t.Fatalf("held request: %+v", res)
	}
	if res := wait(invoke(keyOn(1), time.Now().Add(10*time.Second))); res.err != nil || string(res.resp.Reply) != "+OK\r\n" || calls.Load() != 3 {
		t.Fatalf("refused then retried: %+v after %d calls", res, calls.Load())
	}
	if res := wait(invoke(keyOn(0), time.Now().Add(-time.Second))); !errors.Is(res.err, ErrUnavailable) || !errors.Is(res.err, context.DeadlineExceeded) {
		t.Fatalf("past its deadline: %+v", res)
	}
	_ = r.Close()
	if res := wait(invoke(keyOn(0), time.Time{})); !errors.Is(res.err, ErrClosed) {
		t.Fatalf("after close: %+v", res)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("brokers saw %d calls, want 3", n)
	}
}

// listenServe serves srv on 127.0.0.1 until the test ends and returns its
// address.
func listenServe(t *testing.T, srv *remoting.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestStateStoreRouterMasterChange: OnMasterChange names the broker whose
// connection closed (its master died or dropped the front end's
// connection), and InvokeShard reaches the shard it is given whatever the
// key.
func TestStateStoreRouterMasterChange(t *testing.T) {
	start := func() (*remoting.Server, string) {
		srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		srv.RegisterFunc(protocol.StateStoreInvoke, remoting.PoolSend, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
			r, err := protocol.DecodeStateStoreRequest(req)
			if err != nil {
				return protocol.NewResponse(protocol.SystemError, err.Error()), nil
			}
			resp := protocol.NewResponse(protocol.Success, "")
			resp.Body = (&protocol.StateStoreResponse{Reply: []byte(fmt.Sprintf(":%d\r\n", r.Shard))}).AppendBody(nil)
			return resp, nil
		})
		return srv, listenServe(t, srv)
	}
	sa, a := start()
	_, b := start()
	changed := make(chan string, 4)
	r, err := New(Options{Brokers: map[string]string{"a": a, "b": b}, Shards: 2, OnMasterChange: func(broker string) { changed <- broker }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	route, err := r.Route(ctx, true)
	if err != nil || len(route) != 4 {
		t.Fatalf("route %+v %v", route, err)
	}
	for _, at := range route {
		resp, err := r.InvokeShard(ctx, at, nil, &protocol.StateStoreRequest{ClientID: "c", Payload: []byte("p")})
		if err != nil || string(resp.Reply) != fmt.Sprintf(":%d\r\n", at.Queue) {
			t.Fatalf("shard %+v: %+v %v", at, resp, err)
		}
	}
	_ = sa.Close()
	select {
	case got := <-changed:
		if got != "a" {
			t.Fatalf("master change of %q, want a", got)
		}
	case <-ctx.Done():
		t.Fatal("no master change after a's connection closed")
	}
	if _, err := r.InvokeShard(ctx, route[0], nil, &protocol.StateStoreRequest{ClientID: "c", Payload: []byte("p")}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("shard of a closed broker: %v", err)
	}
	if _, err := r.InvokeShard(ctx, Shard{Broker: "x"}, nil, &protocol.StateStoreRequest{}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("shard without a master: %v", err)
	}
	select {
	case got := <-changed:
		t.Fatalf("unexpected master change of %q", got)
	default:
	}
}

func TestStateStoreRouterMovedMasters(t *testing.T) {
	prev := []Shard{{Broker: "a", Addr: "1"}, {Broker: "a", Addr: "1", Queue: 1}, {Broker: "b", Addr: "2"}, {Broker: "c", Addr: ""}}
	next := []Shard{{Broker: "a", Addr: "1"}, {Broker: "a", Addr: "1", Queue: 1}, {Broker: "b", Addr: "3"}, {Broker: "c", Addr: "4"}, {Broker: "d", Addr: "5"}}
	if got := movedMasters(prev, next); fmt.Sprint(got) != "[b c]" {
		t.Fatalf("moved %v, want [b c]", got)
	}
}
