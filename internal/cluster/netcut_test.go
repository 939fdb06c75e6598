package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// linkProxy stands between a slave and its master's HA port so a test can
// cut the link (close every connection and refuse new ones), black-hole it
// (keep connections but drop every byte), and restore it.
type linkProxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	mode   atomic.Int32 // 0 pass, 1 cut, 2 black hole
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

const (
	linkPass = iota
	linkCut
	linkBlackHole
)

func newLinkProxy(t *testing.T) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		target := p.target.Load()
		if p.mode.Load() == linkCut || target == nil {
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", *target, time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *linkProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.mode.Load() == linkPass {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *linkProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *linkProxy) set(mode int32) {
	p.mode.Store(mode)
	if mode != linkPass {
		if mode == linkCut {
			p.closeAll()
		}
		return
	}
	// Restoring from a black hole: the streams lost bytes, start over.
	p.closeAll()
}

// sendRaw sends one message to the master and returns the response code and
// how long the answer took.
func sendRaw(t *testing.T, c *remoting.Client, addr, topic string) (int32, time.Duration) {
	t.Helper()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "cut", Topic: topic, DefaultTopic: broker.AutoCreateTopicKey,
		DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := c.Invoke(ctx, addr, protocol.NewRequest(protocol.SendMessageV2, h.V2(), []byte("payload")))
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return resp.Code, time.Since(start)
}

// A network cut between master and slave: sync-master sends answer
// SLAVE_NOT_AVAILABLE (link closed) or FLUSH_SLAVE_TIMEOUT (link silent)
// quickly, never hang, and recover when the link returns. The message is
// stored on the master either way.
func TestClusterHANetworkCut(t *testing.T) {
	proxy := newLinkProxy(t)
	const ackTimeout = 400 * time.Millisecond
	c := startHACluster(t, Options{
		SyncMaster: true,
		Broker:     func(i int, o *broker.Options) { o.SlaveAckTimeout = ackTimeout },
		Slave:      func(i int, o *broker.Options) { o.HAMasterAddress = proxy.addr() },
	})
	target := c.Broker(0).HAAddr()
	proxy.target.Store(&target)
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	master := c.BrokerAddr(0)

	waitOK := func(what string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() error {
			if code, _ := sendRaw(t, rc, master, "CutTopic"); code != protocol.Success {
				return fmt.Errorf("%s: send answered %d", what, code)
			}
			return nil
		})
	}
	waitOK("link up")

	// Cut: connections closed, new ones refused.
	proxy.set(linkCut)
	testutil.Eventually(t, 10*time.Second, func() error {
		code, took := sendRaw(t, rc, master, "CutTopic")
		if code != protocol.SlaveNotAvailable && code != protocol.FlushSlaveTimeout {
			return fmt.Errorf("cut link: send answered %d", code)
		}
		if took > ackTimeout+2*time.Second {
			t.Fatalf("cut link: send took %v", took)
		}
		return nil
	})
	code, took := sendRaw(t, rc, master, "CutTopic")
	t.Logf("cut link: code %d in %v", code, took)
	if code != protocol.SlaveNotAvailable || took > time.Second {
		t.Fatalf("after the cut was noticed: code %d in %v, want SLAVE_NOT_AVAILABLE at once", code, took)
	}

	proxy.set(linkPass)
	waitOK("link restored after a cut")

	// Black hole: the connection stays up but nothing arrives; the ack is
	// late, so the send answers FLUSH_SLAVE_TIMEOUT after the ack timeout
	// (or SLAVE_NOT_AVAILABLE once the master gives up on the slave).
	proxy.set(linkBlackHole)
	code, took = sendRaw(t, rc, master, "CutTopic")
	t.Logf("black-holed link: code %d in %v", code, took)
	if code != protocol.FlushSlaveTimeout && code != protocol.SlaveNotAvailable {
		t.Fatalf("black-holed link: send answered %d", code)
	}
	if took > ackTimeout+2*time.Second {
		t.Fatalf("black-holed link: send took %v", took)
	}
	proxy.set(linkPass)
	waitOK("link restored after a black hole")

	// Everything sent, whatever its answer, is on the master, and the
	// slave catches up.
	testutil.Eventually(t, 20*time.Second, func() error { return caughtUp(c, 0) })
}
