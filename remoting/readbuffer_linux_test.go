//go:build linux

package remoting

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"golang.org/x/sys/unix"
)

// soRcvbuf returns the SO_RCVBUF of s's socket (sock.rcvbuf).
func soRcvbuf(t *testing.T, s *sock) int {
	t.Helper()
	n, err := s.rcvbuf()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rmemMax is net.core.rmem_max, the most SO_RCVBUF takes from a process
// without CAP_NET_ADMIN's override.
func rmemMax(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Skipf("net.core.rmem_max: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A server connection's socket has ReadBuffer as its receive buffer from
// its first segment (the kernel doubles the figure, and caps it at
// net.core.rmem_max first), and a window to match; negative leaves it to
// the kernel, whose buffer is then the one any accepted socket starts
// with.
func TestRemotingServerReadBuffer(t *testing.T) {
	a, _ := tcpPair(t)
	kernel := soRcvbuf(t, newSock(a)) // what an accepted socket starts with
	max := rmemMax(t)
	for _, tc := range []struct {
		name string
		opt  int
		want int
	}{
		{"default", 0, 2 * min(DefaultReadBuffer, max)},
		{"256KiB", 256 << 10, 2 * min(256<<10, max)},
		{"kernel's", -1, kernel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == kernel && tc.opt >= 0 {
				t.Skipf("the kernel's own buffer is %d bytes already", kernel)
			}
			s, addr, _ := startServer(t, Options{ReadBuffer: tc.opt}, nil)
			c := newClient(t, ClientOptions{})
			if _, err := c.Invoke(t.Context(), addr, echoReq("x", nil)); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 10*time.Second, "the server's connection", func() bool { return len(s.Conns()) == 1 })
			sc := s.Conns()[0].sock
			if got := soRcvbuf(t, sc); got != tc.want {
				t.Fatalf("server connection's SO_RCVBUF %d, want %d", got, tc.want)
			}
			if tc.opt < 0 {
				return
			}
			// The window is sized by the buffer from the first segment, not
			// clamped where a buffer of the kernel's began (64 KiB).
			var clamp int
			var err error
			if cerr := sc.rc.Control(func(fd uintptr) {
				clamp, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP)
			}); cerr != nil || err != nil {
				t.Fatalf("TCP_WINDOW_CLAMP: %v %v", cerr, err)
			}
			if clamp < tc.want/4 {
				t.Fatalf("server connection's window clamp %d with a %d-byte buffer", clamp, tc.want)
			}
		})
	}
}
