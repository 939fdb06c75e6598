package statestore

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func TestStateStoreClientOptions(t *testing.T) {
	if err := (&Options{}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty options: %v", err)
	}
	if err := (&RouterOptions{}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty router options: %v", err)
	}
	if got := string(hexDecode("6B31")); got != "k1" {
		t.Fatalf("hexDecode %q", got)
	}
	if hexDecode("6") != nil || hexDecode("ZZ") != nil {
		t.Fatal("bad hex accepted")
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
	a, b := start("a", protocol.Success), start("b", protocol.SystemError)
	r, err := NewRouter(RouterOptions{Brokers: map[string]string{"a": a, "b": b}, Shards: 2})
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
