package remoting

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// The benchmarks report SmartGo's rates next to a raw baseline measured in
// the same run: plain TCP connections moving the very same frame bytes
// (echo for round trips: write a frame, read it back; one-way: write
// frames, the peer reads them). The baseline for N callers uses N
// connections, one per caller; SmartGo multiplexes all callers on one
// connection. "ratio" = SmartGo rate / baseline rate (target >= 0.7).

var benchSizes = []int{128, 4096}
var benchCallers = []int{1, 64}

// benchDispatch names how the server runs the processor: "pool" hands
// every request to a worker (Register), "inline" lets it run on the
// connection's reader when the pool is idle (RegisterInline).
var benchDispatch = []string{"pool", "inline"}

func benchRegister(s *Server, mode string, fn func(c *Conn, req *protocol.Command) (*protocol.Command, error)) {
	if mode == "inline" {
		s.RegisterInline(codeEcho, PoolDefault, ProcessorFunc(fn))
		return
	}
	s.RegisterFunc(codeEcho, PoolDefault, fn)
}

// echoServer echoes length-prefixed frames, one write per frame.
func echoServer(b *testing.B) (addr string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReaderSize(nc, 64<<10)
				buf := make([]byte, 0, 64<<10)
				for {
					var lw [4]byte
					if _, err := io.ReadFull(br, lw[:]); err != nil {
						return
					}
					n := int(binary.BigEndian.Uint32(lw[:]))
					buf = append(buf[:0], lw[:]...)
					buf = append(buf, make([]byte, n)...)
					if _, err := io.ReadFull(br, buf[4:]); err != nil {
						return
					}
					if _, err := nc.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// sinkServer reads and discards everything; count reports frames seen.
func sinkServer(b *testing.B, frameLen int) (addr string, frames *atomic.Int64, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	frames = new(atomic.Int64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				buf := make([]byte, 256<<10)
				var total int64
				for {
					n, err := nc.Read(buf)
					total += int64(n)
					frames.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	_ = frameLen
	return ln.Addr().String(), frames, func() { ln.Close(); wg.Wait() }
}

// runCallers runs n operations spread over callers goroutines and returns
// the elapsed time.
func runCallers(b *testing.B, n, callers int, op func(g int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := time.Now()
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := op(g); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// benchBodies are shared request bodies (never modified), so the SmartGo
// side allocates no more per operation than the baseline does.
var benchBodies = map[int][]byte{128: make([]byte, 128), 4096: make([]byte, 4096)}

func benchRequest(size int) *protocol.Command {
	r := protocol.NewRequest(codeEcho, nil, benchBodies[size])
	r.ExtFields = protocol.ExtFields{"v": "x"}
	return r
}

// rounds is how many alternating slices of baseline and SmartGo work each
// benchmark runs, so that load changes on a shared machine hit both sides
// alike.
const rounds = 10

// interleave runs base and ours alternately in rounds slices of n total
// operations each and returns their total times. Only ours is timed by the
// benchmark clock.
func interleave(b *testing.B, n int, base, ours func(n int) time.Duration) (baseDur, oursDur time.Duration) {
	for r := 0; r < rounds; r++ {
		k := n / rounds
		if r == rounds-1 {
			k = n - k*(rounds-1)
		}
		if k == 0 {
			continue
		}
		b.StopTimer()
		baseDur += base(k)
		b.StartTimer()
		oursDur += ours(k)
	}
	b.StopTimer()
	return baseDur, oursDur
}

func BenchmarkRemotingRoundTrip(b *testing.B) {
	for _, mode := range benchDispatch {
		for _, size := range benchSizes {
			for _, callers := range benchCallers {
				b.Run(fmt.Sprintf("dispatch=%s/size=%d/callers=%d", mode, size, callers), func(b *testing.B) {
					b.StopTimer()
					frame, err := protocol.EncodeFrame(benchRequest(size))
					if err != nil {
						b.Fatal(err)
					}
					// Baseline: plain TCP echo, one connection per caller.
					eaddr, stopEcho := echoServer(b)
					defer stopEcho()
					conns := make([]net.Conn, callers)
					readers := make([]*bufio.Reader, callers)
					bufs := make([][]byte, callers)
					for i := range conns {
						if conns[i], err = net.Dial("tcp", eaddr); err != nil {
							b.Fatal(err)
						}
						defer conns[i].Close()
						readers[i] = bufio.NewReaderSize(conns[i], 64<<10)
						bufs[i] = make([]byte, len(frame))
					}
					s, err := NewServer(Options{Addr: "127.0.0.1:0"})
					if err != nil {
						b.Fatal(err)
					}
					benchRegister(s, mode, echo)
					if err := s.Start(context.Background()); err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					c, err := NewClient(ClientOptions{})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					addr := s.Addr().String()
					if _, err := c.Invoke(context.Background(), addr, benchRequest(size)); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(2 * len(frame)))
					b.ReportAllocs()
					b.ResetTimer()
					b.StopTimer()
					echoDur, rpcDur := interleave(b, b.N, func(n int) time.Duration {
						return runCallers(b, n, callers, func(g int) error {
							if _, err := conns[g].Write(frame); err != nil {
								return err
							}
							_, err := io.ReadFull(readers[g], bufs[g])
							return err
						})
					}, func(n int) time.Duration {
						return runCallers(b, n, callers, func(g int) error {
							resp, err := c.Invoke(context.Background(), addr, benchRequest(size))
							if err == nil && len(resp.Body) != size {
								err = fmt.Errorf("short body %d", len(resp.Body))
							}
							return err
						})
					})
					echoRate := float64(b.N) / echoDur.Seconds()
					rpcRate := float64(b.N) / rpcDur.Seconds()
					b.ReportMetric(rpcRate, "rpc/s")
					b.ReportMetric(echoRate, "echo/s")
					b.ReportMetric(rpcRate/echoRate, "ratio")
				})
			}
		}
	}
}

func BenchmarkRemotingOneway(b *testing.B) {
	for _, mode := range benchDispatch {
		for _, size := range benchSizes {
			for _, callers := range benchCallers {
				b.Run(fmt.Sprintf("dispatch=%s/size=%d/callers=%d", mode, size, callers), func(b *testing.B) {
					b.StopTimer()
					req := benchRequest(size)
					req.MarkOneway()
					frame, err := protocol.EncodeFrame(req)
					if err != nil {
						b.Fatal(err)
					}
					// Baseline: plain TCP writes of the same frames, one
					// connection per caller, until the peer has read them all.
					saddr, got, stopSink := sinkServer(b, len(frame))
					defer stopSink()
					conns := make([]net.Conn, callers)
					for i := range conns {
						if conns[i], err = net.Dial("tcp", saddr); err != nil {
							b.Fatal(err)
						}
						defer conns[i].Close()
					}
					var seen atomic.Int64
					// A queue that holds every frame: a full queue would drop
					// one-way frames (SYSTEM_BUSY is never sent for them).
					s, err := NewServer(Options{Addr: "127.0.0.1:0", DefaultPool: PoolOptions{QueueSize: b.N + 16}})
					if err != nil {
						b.Fatal(err)
					}
					benchRegister(s, mode, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
						seen.Add(1)
						return nil, nil
					})
					if err := s.Start(context.Background()); err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					c, err := NewClient(ClientOptions{})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cn, err := c.Conn(context.Background(), s.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(len(frame)))
					b.ReportAllocs()
					b.ResetTimer()
					b.StopTimer()
					var rawSent, sent int64
					rawDur, dur := interleave(b, b.N, func(n int) time.Duration {
						start := time.Now()
						runCallers(b, n, callers, func(g int) error {
							_, err := conns[g].Write(frame)
							return err
						})
						rawSent += int64(n)
						for got.Load() < rawSent*int64(len(frame)) {
							time.Sleep(20 * time.Microsecond)
						}
						return time.Since(start)
					}, func(n int) time.Duration {
						start := time.Now()
						runCallers(b, n, callers, func(g int) error {
							return cn.Oneway(benchRequest(size))
						})
						sent += int64(n)
						for seen.Load() < sent {
							time.Sleep(20 * time.Microsecond)
						}
						return time.Since(start)
					})
					rawRate := float64(b.N) / rawDur.Seconds()
					rate := float64(b.N) / dur.Seconds()
					b.ReportMetric(rate, "frames/s")
					b.ReportMetric(rawRate, "raw/s")
					b.ReportMetric(rate/rawRate, "ratio")
				})
			}
		}
	}
}
