package remoting

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// The benchmarks report SmartGo's rates next to a raw baseline measured in
// the same run: plain TCP connections moving the very same frame bytes
// (echo for round trips: write a frame, read the whole frame back; one-way:
// write frames, the peer reads them frame by frame). The baseline for N
// callers uses N connections, one per caller; SmartGo multiplexes all
// callers on one connection. "ratio" = SmartGo rate / baseline rate (target
// >= 0.7); "cpu-ratio" = baseline CPU time per operation / SmartGo's, which
// on a shared machine is steadier than the rates.
//
// Neither side is a perfect twin of the other: with 64 callers the
// round-trip baseline cannot batch (one frame in flight per connection)
// while SmartGo's one connection can, and the one-way baseline receives
// on 64 connections, that is on every core, while SmartGo's one
// connection has one reader.

var benchSizes = []int{128, 4096}
var benchCallers = []int{1, 64}

// benchDispatch names how the server runs the processor: "pool" hands
// every request to a worker (Register), "inline" lets it run on the
// connection's reader (RegisterInline). Either way
// the processor is NoRetain and the callers recycle their responses, so
// receive buffers are reused on both ends.
var benchDispatch = []string{"pool", "inline"}

func benchRegister(s *Server, mode string, fn func(c *Conn, req *protocol.Command) (*protocol.Command, error)) {
	s.RegisterWith(codeEcho, PoolDefault, ProcessorFunc(fn), RegisterOptions{Inline: mode == "inline", NoRetain: true})
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

// sinkServer reads length-prefixed frames and counts them: the read half
// of echoServer, so that the one-way baseline frames the stream the way any
// receiver of a framed protocol must (reading raw bytes without looking at
// them would be a cheaper task than receiving frames).
func sinkServer(b *testing.B) (addr string, frames *atomic.Int64, stop func()) {
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
				br := bufio.NewReaderSize(nc, 64<<10)
				buf := make([]byte, 0, 64<<10)
				for {
					var lw [4]byte
					if _, err := io.ReadFull(br, lw[:]); err != nil {
						return
					}
					n := int(binary.BigEndian.Uint32(lw[:]))
					buf = append(buf[:0], make([]byte, n)...)
					if _, err := io.ReadFull(br, buf); err != nil {
						return
					}
					frames.Add(1)
				}
			}()
		}
	}()
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

// cpuTime is the CPU time (user + system) the process used so far: both
// ends of either side run in this process, so the difference over a slice
// of work is that work's whole cost, which on a shared machine is steadier
// than the wall clock.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sideTimes are the wall and CPU times of one side of a benchmark.
type sideTimes struct{ wall, cpu time.Duration }

// interleave runs base and ours alternately in rounds slices of n total
// operations each and returns their total times. Only ours is timed by the
// benchmark clock.
func interleave(b *testing.B, n int, base, ours func(n int) time.Duration) (baseT, oursT sideTimes) {
	for r := 0; r < rounds; r++ {
		k := n / rounds
		if r == rounds-1 {
			k = n - k*(rounds-1)
		}
		if k == 0 {
			continue
		}
		b.StopTimer()
		c0 := cpuTime(b)
		baseT.wall += base(k)
		c1 := cpuTime(b)
		baseT.cpu += c1 - c0
		b.StartTimer()
		oursT.wall += ours(k)
		b.StopTimer()
		oursT.cpu += cpuTime(b) - c1
	}
	return baseT, oursT
}

// reportRates reports both sides' rates, their ratio, and the CPU time
// per operation of each side (cpu-ratio = baseline CPU / SmartGo CPU, so
// above 1 means SmartGo spends less CPU per operation).
func reportRates(b *testing.B, base, ours sideTimes, oursUnit, baseUnit string) {
	baseRate := float64(b.N) / base.wall.Seconds()
	oursRate := float64(b.N) / ours.wall.Seconds()
	b.ReportMetric(oursRate, oursUnit)
	b.ReportMetric(baseRate, baseUnit)
	b.ReportMetric(oursRate/baseRate, "ratio")
	b.ReportMetric(float64(ours.cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(base.cpu.Nanoseconds())/float64(b.N), "base-cpu-ns/op")
	b.ReportMetric(float64(base.cpu)/float64(ours.cpu), "cpu-ratio")
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
					used := make([]bool, callers)
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
					echoT, rpcT := interleave(b, b.N, func(n int) time.Duration {
						return runCallers(b, n, callers, func(g int) error {
							if _, err := conns[g].Write(frame); err != nil {
								return err
							}
							used[g] = true
							_, err := io.ReadFull(readers[g], bufs[g])
							return err
						})
					}, func(n int) time.Duration {
						return runCallers(b, n, callers, func(g int) error {
							resp, err := c.Invoke(context.Background(), addr, benchRequest(size))
							if err == nil && len(resp.Body) != size {
								err = fmt.Errorf("short body %d", len(resp.Body))
							}
							if err == nil {
								resp.Recycle()
							}
							return err
						})
					})
					for g := range bufs { // the baseline really echoed the frame
						if used[g] && !bytes.Equal(bufs[g], frame) {
							b.Fatalf("echo baseline: caller %d read back other bytes", g)
						}
					}
					reportRates(b, echoT, rpcT, "rpc/s", "echo/s")
				})
			}
		}
	}
}

// BenchmarkRemotingOneway sends one-way frames. With several senders it
// runs against two baselines: "conns" gives each sender its own connection
// (the receiving side then reads on every core, while SmartGo's senders
// share one connection and its one reader, as RocketMQ clients do), and
// "shared" has the senders take turns writing their frames on one
// connection, the raw form of SmartGo's topology.
func BenchmarkRemotingOneway(b *testing.B) {
	for _, mode := range benchDispatch {
		for _, size := range benchSizes {
			for _, callers := range benchCallers {
				for _, baseline := range []string{"conns", "shared"} {
					if baseline == "shared" && callers == 1 {
						continue // the same as conns
					}
					benchOneway(b, mode, size, callers, baseline)
				}
			}
		}
	}
}

// onewayWarmup is how many frames each side of a one-way benchmark sends
// before the clock starts.
const onewayWarmup = 20000

func benchOneway(b *testing.B, mode string, size, callers int, baseline string) {
	b.Run(fmt.Sprintf("dispatch=%s/size=%d/callers=%d/baseline=%s", mode, size, callers, baseline), func(b *testing.B) {
		b.StopTimer()
		req := benchRequest(size)
		req.MarkOneway()
		frame, err := protocol.EncodeFrame(req)
		if err != nil {
			b.Fatal(err)
		}
		// Baseline: plain TCP writes of the same frames, one
		// connection per caller, until the peer has read them all.
		saddr, got, stopSink := sinkServer(b)
		defer stopSink()
		nconns := callers
		if baseline == "shared" {
			nconns = 1
		}
		conns := make([]net.Conn, nconns)
		for i := range conns {
			if conns[i], err = net.Dial("tcp", saddr); err != nil {
				b.Fatal(err)
			}
			defer conns[i].Close()
		}
		var connMu sync.Mutex // baseline=shared: one frame at a time on conns[0]
		var seen atomic.Int64
		// A queue that holds every frame: a full queue would drop
		// one-way frames (SYSTEM_BUSY is never sent for them).
		s, err := NewServer(Options{Addr: "127.0.0.1:0", DefaultPool: PoolOptions{QueueSize: b.N + onewayWarmup + 16}})
		if err != nil {
			b.Fatal(err)
		}
		var bad atomic.Int64
		benchRegister(s, mode, func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			if len(req.Body) != size || req.ExtFields["v"] != "x" {
				bad.Add(1)
			}
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
		raw := func(n int) time.Duration {
			start := time.Now()
			runCallers(b, n, callers, func(g int) error {
				if baseline == "shared" {
					connMu.Lock()
					defer connMu.Unlock()
					_, err := conns[0].Write(frame)
					return err
				}
				_, err := conns[g].Write(frame)
				return err
			})
			rawSent += int64(n)
			for got.Load() < rawSent {
				time.Sleep(20 * time.Microsecond)
			}
			return time.Since(start)
		}
		ours := func(n int) time.Duration {
			start := time.Now()
			runCallers(b, n, callers, func(g int) error {
				return cn.Oneway(benchRequest(size))
			})
			sent += int64(n)
			for seen.Load() < sent {
				time.Sleep(20 * time.Microsecond)
			}
			return time.Since(start)
		}
		// Warm-up, untimed, on both sides: the first megabytes through a
		// fresh connection also grow its buffers (SmartGo's write queue,
		// the kernel's socket buffers), which a short run would otherwise
		// mostly measure.
		raw(onewayWarmup)
		ours(onewayWarmup)
		rawT, oursT := interleave(b, b.N, raw, ours)
		if n := bad.Load(); n > 0 {
			b.Fatalf("%d one-way frames arrived damaged", n)
		}
		reportRates(b, rawT, oursT, "frames/s", "raw/s")
	})
}
