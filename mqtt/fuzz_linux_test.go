package mqtt

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	fuzzOnce sync.Once
	fuzzSrv  *testServer
)

// FuzzMQTTConnection feeds random bytes to a live connection handler over
// a socketpair: the server must neither panic nor leak the connection.
func FuzzMQTTConnection(f *testing.F) {
	f.Add([]byte{0x10, 0x0D, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60, 0, 0, 0, 0xC0, 0x00, 0xE0, 0x00})
	f.Add([]byte{0x10, 0x0C, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 0, 0x82, 0x06, 0, 1, 0, 1, '#', 0})
	f.Add([]byte{0x10, 0x0D, 0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 60, 0, 0, 0, 0x32, 0x06, 0, 1, 'a', 0, 1, 0})
	f.Add([]byte{0x30, 0xFF, 0xFF, 0xFF, 0x7F})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOnce.Do(func() { fuzzSrv = startServer(&testing.T{}, nil) })
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Skip(err)
		}
		unix.SetNonblock(fds[0], true)
		fuzzSrv.acceptFD(fds[0], "fuzz")
		unix.Write(fds[1], data)
		unix.Shutdown(fds[1], unix.SHUT_WR)
		tv := unix.NsecToTimeval(int64(2 * time.Second))
		unix.SetsockoptTimeval(fds[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fds[1], buf)
			if n <= 0 || err != nil {
				if err == unix.EAGAIN {
					t.Fatalf("server kept the connection open after EOF")
				}
				break
			}
		}
		unix.Close(fds[1])
	})
}
