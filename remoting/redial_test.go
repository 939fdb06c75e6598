package remoting

import (
	"context"
	"testing"
)

// A request made right after the peer closed the connection (its Done is
// closed, the client's own bookkeeping may still be catching up) goes on a
// new connection instead of failing on the dead one.
func TestClientRedialsAfterPeerClose(t *testing.T) {
	s, addr, _ := startServer(t, Options{}, nil)
	c := newClient(t, ClientOptions{})
	ctx := context.Background()
	for i := range 100 {
		if _, err := c.Invoke(ctx, addr, echoReq("a", nil)); err != nil {
			t.Fatalf("round %d, before the close: %v", i, err)
		}
		cn, err := c.Conn(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range s.Conns() {
			_ = sc.Close()
		}
		<-cn.Done()
		resp, err := c.Invoke(ctx, addr, echoReq("b", nil))
		if err != nil {
			t.Fatalf("round %d, right after the peer closed: %v", i, err)
		}
		if resp.ExtFields["v"] != "b" {
			t.Fatalf("round %d: response %v", i, resp)
		}
	}
}
