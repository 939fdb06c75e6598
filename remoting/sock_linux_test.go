//go:build linux

package remoting

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// A TCP connection's reads and writes are raw system calls; a writev of
// more parts than one call takes and more bytes than the socket buffers
// hold (partial writes, waits in the poller) arrives whole and in order,
// and reads see the end of the stream and their deadline as net.Conn's do.
func TestRemotingSockRawIO(t *testing.T) {
	a, b := tcpPair(t)
	sa, sb := newSock(a), newSock(b)
	if sa.rc == nil || sb.rc == nil {
		t.Fatal("TCP connection without raw I/O")
	}
	var want []byte
	var parts [][]byte
	for i := range 2*maxIov + 7 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%2048)
		parts = append(parts, p)
		want = append(want, p...)
	}
	errc := make(chan error, 1)
	go func() { errc <- sa.writev(append([][]byte(nil), parts...)) }()
	got := make([]byte, 0, len(want))
	buf := make([]byte, 16<<10)
	for len(got) < len(want) {
		n, err := sb.Read(buf)
		if err != nil {
			t.Fatalf("read after %d of %d bytes: %v", len(got), len(want), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes read differ from the parts written")
	}

	if err := b.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	if err := b.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := sa.write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n, err := io.ReadFull(sb, buf[:4]); err != nil || string(buf[:n]) != "last" {
		t.Fatalf("read %q: %v", buf[:n], err)
	}
	if _, err := sb.Read(buf); err != io.EOF {
		t.Fatalf("read at the end of the stream: %v", err)
	}
	b.Close()
	if _, err := sb.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v", err)
	}
	if err := sb.write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed connection: %v", err)
	}
}
