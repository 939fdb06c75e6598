package remoting

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// PoolStats reports the requests waiting for a busy pool and how long the
// oldest of them has waited; both fall to zero once the pool catches up.
func TestRemotingPoolStats(t *testing.T) {
	const codeBlock int32 = 9100
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	started := make(chan struct{}, 16)
	srv, addr, _ := startServer(t, Options{AdminPool: PoolOptions{Workers: 1, QueueSize: 8}}, func(s *Server) {
		s.RegisterFunc(codeBlock, PoolAdmin, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			started <- struct{}{}
			<-release
			return protocol.NewResponse(protocol.Success, ""), nil
		})
	})
	t.Cleanup(unblock) // runs before the server's Close, which waits for the processors
	if st := srv.PoolStats(PoolAdmin); st.Workers != 1 || st.Capacity != 8 || st.Queued != 0 || st.HeadWait != 0 {
		t.Fatalf("idle pool %+v", st)
	}
	c := newClient(t, ClientOptions{})
	done := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := c.Invoke(ctx, addr, protocol.NewRequest(codeBlock, nil, nil))
			done <- err
		}()
	}
	<-started
	testutil.WaitFor(t, 10*time.Second, "three queued requests", func() bool { return srv.PoolStats(PoolAdmin).Queued == 3 })
	first := srv.PoolStats(PoolAdmin).HeadWait
	time.Sleep(30 * time.Millisecond) // let the head age measurably
	st := srv.PoolStats(PoolAdmin)
	if st.Running != 1 || st.HeadWait < first+30*time.Millisecond || st.HeadWait > time.Minute {
		t.Fatalf("busy pool %+v (head wait before %v)", st, first)
	}
	unblock()
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "an idle pool", func() bool {
		st := srv.PoolStats(PoolAdmin)
		return st.Queued == 0 && st.Running == 0 && st.HeadWait == 0
	})
}
