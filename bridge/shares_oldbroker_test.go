package bridge

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// oldBrokerProxy listens on listen and forwards every remoting frame to
// and from upstream, but answers START_SHARE_GROUP itself with
// REQUEST_CODE_NOT_SUPPORTED, as a broker that predates the request does.
// It returns how many it refused.
func oldBrokerProxy(t *testing.T, listen, upstream string) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			track(down)
			track(up)
			var wmu sync.Mutex // frames to down, from both directions
			writeDown := func(b []byte) error {
				wmu.Lock()
				defer wmu.Unlock()
				_, err := down.Write(b)
				return err
			}
			pipe := func(from io.Reader, to func([]byte) error, refuse bool) {
				defer wg.Done()
				defer down.Close()
				defer up.Close()
				var buf []byte
				for {
					cmd, b, err := protocol.ReadFrame(from, buf, 64<<20)
					buf = b
					if err != nil {
						return
					}
					if refuse && !cmd.IsResponse() && cmd.Code == int32(protocol.StartShareGroup) {
						refused.Add(1)
						resp := protocol.NewResponse(protocol.RequestCodeNotSupported, protocol.NotSupportedRemark(cmd.Code))
						resp.Opaque = cmd.Opaque
						frame, err := protocol.EncodeFrame(resp)
						if err != nil || writeDown(frame) != nil {
							return
						}
						continue
					}
					frame := make([]byte, 4+len(b))
					frame[0], frame[1], frame[2], frame[3] = byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))
					copy(frame[4:], b)
					if to(frame) != nil {
						return
					}
				}
			}
			wg.Add(2)
			go pipe(down, func(b []byte) error { _, err := up.Write(b); return err }, true)
			go pipe(up, writeDown, false)
		}
	}()
	return &refused
}

// A broker that predates START_SHARE_GROUP answers it "request code not
// supported": a new shared subscription then starts with the ordinary
// offset requests (admin.StartShareGroup's fallback), so its members get
// every message published after the SUBACK and none of the history. Its
// consumer used to never start: the members got nothing.
func TestBridgeSharedSubscriptionOnOldBroker(t *testing.T) {
	// The broker listens on 127.0.0.1:port and registers as
	// 127.0.0.2:port (its Addr); the proxy listens there and forwards to
	// 127.0.0.1:port.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), Broker: func(_ int, o *broker.Options) { o.AdvertiseIP = "127.0.0.2" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, port, err := net.SplitHostPort(c.BrokerAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	refused := oldBrokerProxy(t, net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("127.0.0.1", port))
	b := startBridge(t, c, nil)
	checkShareFromSuback(t, ctx, b, "old", "old")
	if refused.Load() == 0 {
		t.Fatal("the proxy refused no START_SHARE_GROUP: the test did not test the fallback")
	}
}
