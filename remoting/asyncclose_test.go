package remoting

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// readerWaitingForCallbacks reports whether some connection's reader has
// ended and waits for the connection's async callbacks.
func readerWaitingForCallbacks() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sync.(*WaitGroup).Wait") && strings.Contains(g, "remoting.(*Conn).start.func1") {
			return true
		}
	}
	return false
}

// An async call whose timeout fires just before its connection closes:
// the callback is counted before the connection's reader waits for the
// callbacks (under -race the detector saw the count taken after, a
// WaitGroup Add racing its Wait, in TestClusterReplyForwardedToRequestersBroker),
// and the reader's wait covers it.
func TestRemotingAsyncTimeoutThenClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if nc, err := ln.Accept(); err == nil {
			accepted <- nc
		}
	}()
	c := newClient(t, ClientOptions{})
	cn, err := c.Conn(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc := <-accepted // reads nothing, answers nothing
	started, hold, errc := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	if err := cn.InvokeAsync(protocol.NewRequest(9003, nil, nil), 10*time.Millisecond, func(_ *protocol.Command, err error) {
		close(started)
		<-hold
		errc <- err
	}); err != nil {
		t.Fatal(err)
	}
	<-started // timed out: the callback runs
	nc.Close()
	<-cn.Done()
	testutil.WaitFor(t, 10*time.Second, "the reader waiting for the callback", readerWaitingForCallbacks)
	close(hold)
	if err := <-errc; !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
}
