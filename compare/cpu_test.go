package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// Server CPU per message with single-message requests.
//
// BenchmarkServerCPUPerMessage runs three servers, each in its own process
// (this test binary, re-executed), all in the same run, their messages in
// slices taken in turn (cpuRound), and drives each with the same load
// from this process: conns connections
// with window requests in flight on each, one message per request, 1 KiB
// bodies, 8 queues. The figure is the server process's CPU time (its
// threads' run time in ns, testutil.ProcessCPU) divided by the messages
// acknowledged:
//
//   - smartgo: a broker (default options: asynchronous flush) answering
//     SEND_MESSAGE (code 10, long header names, JSON header), the request
//     rocketmq-client-go v2.1.2 sends for each message; the client writes
//     each request with its own write, as that client does.
//   - tcp: a plain TCP server that reads each of the same request frames
//     and writes back a response frame of the same bytes as the broker's
//     answer, with the same client: the floor (syscalls and framing only).
//   - jetstream: an embedded nats-server with a file-stored stream,
//     driven by nats.go's asynchronous JetStream publishes (its own
//     client), the same bodies, connections and window.
//
// One op is one message on each server. Run it with a fixed count
// (COMPARE_CPU_PROFILE=/tmp/%s.pprof profiles each server's CPU,
// COMPARE_CPU_ALLOCS=/tmp/%s.allocs its allocations, sampled every 4 KiB):
//
//	go test -run '^$' -bench ServerCPUPerMessage -benchtime 100000x
//
// COMPARE_CPU_BASE_BIN=<this package's test binary built from another
// commit> (go test -c) adds a fourth server, base: that build's smartgo
// server, run right before this one's under the same load, reported as
// base-cpu-µs/msg and smartgo/base (a same-run baseline for a change).
// COMPARE_CPU_ONLY=base,smartgo runs only the servers named;
// COMPARE_CPU_ROUNDS=n runs them all n times in turn, each time in new
// processes, and reports the sums (a small difference needs several
// rounds on a busy machine); COMPARE_CPU_SLICES=n sets how many slices
// each server's messages are driven in (cpuSlices; 1: one window a
// server, one server after another, as before slices were).
// Each slice starts with memory just freed for the server's page cache
// (writeBallast; COMPARE_CPU_BALLAST_MB=0 turns it off).
// COMPARE_CPU_STATS and COMPARE_CPU_PERF record what each server's
// window did beside its CPU time (cpu_stats_test.go).
func BenchmarkServerCPUPerMessage(b *testing.B) {
	n := int64(b.N)
	warm := min(n/10, 5000)
	frames, err := sendFrames(cpuSize, cpuQueues)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := sendResponseFrame()
	if err != nil {
		b.Fatal(err)
	}
	totals := map[string]*cpuTotal{}
	systems := []string{"tcp", "smartgo", "jetstream"}
	baseBin := os.Getenv("COMPARE_CPU_BASE_BIN")
	if baseBin != "" {
		systems = []string{"tcp", "base", "smartgo", "jetstream"}
	}
	if only := os.Getenv("COMPARE_CPU_ONLY"); only != "" {
		systems = slices.DeleteFunc(systems, func(s string) bool { return !slices.Contains(strings.Split(only, ","), s) })
	}
	rounds := 1
	if r, err := strconv.Atoi(os.Getenv("COMPARE_CPU_ROUNDS")); err == nil && r > 1 {
		rounds = r
	}
	nSlices := cpuSlices
	if v := os.Getenv("COMPARE_CPU_SLICES"); v != "" {
		if nSlices, err = strconv.Atoi(v); err != nil || nSlices < 1 {
			b.Fatalf("COMPARE_CPU_SLICES=%q: want a number of slices", v)
		}
	}
	for round := 0; round < rounds; round++ {
		for sys, r := range cpuRound(b, systems, baseBin, frames, len(resp), n, warm, nSlices, round*nSlices) {
			t := totals[sys]
			if t == nil {
				t = &cpuTotal{}
				totals[sys] = t
			}
			t.cpu += r.cpu
			t.el += r.el
			t.n += r.n
		}
	}
	perMsg := map[string]float64{}
	for sys, t := range totals {
		perMsg[sys] = float64(t.cpu) / float64(time.Microsecond) / float64(t.n)
		b.ReportMetric(perMsg[sys], sys+"-cpu-µs/msg")
		b.ReportMetric(float64(t.n)/t.el.Seconds(), sys+"-msgs/s")
	}
	if t := perMsg["tcp"]; t > 0 {
		b.ReportMetric(perMsg["smartgo"]/t, "smartgo/tcp")
	}
	if j := perMsg["jetstream"]; j > 0 {
		b.ReportMetric(perMsg["smartgo"]/j, "smartgo/jetstream")
	}
	if r := perMsg["base"]; r > 0 {
		b.ReportMetric(perMsg["smartgo"]/r, "smartgo/base")
	}
}

// The load of BenchmarkServerCPUPerMessage.
const (
	cpuConns  = 4
	cpuWindow = 250 // 1,000 in flight in all
	cpuSize   = 1024
	cpuQueues = 8
	cpuSlices = 10 // each server's messages in slices, the servers' in turn (cpuRound)
	// cpuSliceMin is the fewest messages in a slice: ten times the
	// requests in flight, so that a slice's start (its connections idle
	// since the last: TCP restarts its window after idle) weighs little.
	cpuSliceMin = 10 * cpuConns * cpuWindow
)

// cpuRound starts every server of systems (base: baseBin's smartgo),
// each in its own process, and warms each up with warm messages; then it
// drives them with n messages each, in nSlices slices (of cpuSliceMin
// messages at least) taken in turn
// (slice i of every server before slice i+1 of any, in sliceOrder's
// order for turn turn0+i) so that, with more than one slice, the servers
// meet the machine alike: on the shared VM how fast the CPUs run moves
// from one tenth of a second to the next (cpu_stats_test.go), and a
// window of one server's messages after another's measured that as much
// as the servers. A server's CPU time is its process's from right before
// its first slice to right after its last (one slice: its window, as
// before slices were), so what it does between its slices (its flushes,
// its timers) is counted; its elapsed time is its slices'.
func cpuRound(b *testing.B, systems []string, baseBin string, frames [][]byte, respLen int, n, warm int64, nSlices, turn0 int) map[string]*cpuTotal {
	type target struct {
		sys   string
		srv   *cpuServer
		load  func(count int64) error
		first testutil.CPUSample
		last  testutil.CPUSample
		total cpuTotal
		stats func(cpu, el time.Duration, n int64, slices []float64)
	}
	var ts []*target
	for _, sys := range systems {
		bin, as := os.Args[0], sys
		env := map[string]string{"COMPARE_CPU_RESPONSE_LEN": strconv.Itoa(respLen)}
		if sys == "base" {
			bin, as = baseBin, "smartgo"
			for _, k := range []string{"COMPARE_CPU_PROFILE", "COMPARE_CPU_ALLOCS"} {
				if p := os.Getenv(k); p != "" {
					env[k] = strings.ReplaceAll(p, "%s", "base")
				}
			}
		}
		t := &target{sys: sys, srv: startCPUServer(b, bin, as, env)}
		t.load = func(count int64) error { return frameLoad(t.srv.addr, frames, cpuConns, cpuWindow, count) }
		if sys == "jetstream" {
			js, err := newJSLoad(t.srv.addr, cpuConns, cpuWindow)
			if err != nil {
				b.Fatal(err)
			}
			defer js.close()
			t.load = func(count int64) error { return js.run(count, cpuSize) }
		}
		if warm > 0 {
			if err := t.load(warm); err != nil {
				b.Fatalf("%s warm-up: %v", sys, err)
			}
		}
		ts = append(ts, t)
	}
	nSlices = int(max(min(int64(nSlices), n/cpuSliceMin), 1))
	cpuNow := func(t *target) testutil.CPUSample {
		c, err := testutil.ProcessCPU(t.srv.pid)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	for i := range nSlices {
		count := n / int64(nSlices)
		if int64(i) < n%int64(nSlices) {
			count++
		}
		for _, j := range sliceOrder(len(ts), turn0+i) {
			t := ts[j]
			ballast := writeBallast(b, count)
			ballast() // freed right before the slice (cpu_ballast_test.go)
			if i == 0 {
				t.stats = windowStats(b, t.sys, t.srv.pid)
			}
			c0 := cpuNow(t)
			if i == 0 {
				t.first = c0
			}
			start := time.Now()
			if err := t.load(count); err != nil {
				b.Fatalf("%s: %v", t.sys, err)
			}
			t.total.el += time.Since(start)
			t.last = cpuNow(t)
			in := t.last.Since(c0)
			t.total.slices = append(t.total.slices, float64(in)/float64(time.Microsecond)/float64(count))
		}
	}
	got := map[string]*cpuTotal{}
	for _, t := range ts {
		t.total.cpu, t.total.n = t.last.Since(t.first), n
		got[t.sys] = &t.total
		t.stats(t.total.cpu, t.total.el, n, t.total.slices)
		t.srv.stop(b)
	}
	return got
}

// sliceOrder returns the order in which n servers take their slices in
// turn t: row t of a Williams design (n rows for an even n; for an odd n,
// 2n: the n rows, then the same rows reversed). Over each full cycle of
// rows every server's slice comes right after every other server's
// equally often. A slice meets what the one before it left behind (the
// page cache it dirtied being written back, the memory it freed): a
// fixed cycle that only rotated which server starts a turn put each
// server after the same one nearly every turn (JetStream after SmartGo,
// SmartGo after the plain TCP server that writes nothing; with a base
// build, SmartGo after base), and the server after a writer cost 3-8 %
// more in the eighteenth session's swapped A/B runs.
func sliceOrder(n, t int) []int {
	if n <= 0 {
		return nil
	}
	// The first row is 0, 1, n-1, 2, n-2, ...: its steps from one server
	// to the next, mod n, are each nonzero step once (even n) or twice
	// counting the reversed rows (odd n); row r adds r to every entry.
	first := make([]int, n)
	for k, lo, hi := 1, 1, n-1; k < n; k++ {
		if k%2 == 1 {
			first[k], lo = lo, lo+1
		} else {
			first[k], hi = hi, hi-1
		}
	}
	rows := n
	if n%2 == 1 {
		rows = 2 * n
	}
	r := t % rows
	out := make([]int, n)
	for k := range out {
		out[k] = (first[k] + r) % n
	}
	if r >= n {
		slices.Reverse(out)
	}
	return out
}

// cpuTotal is a server's CPU time, elapsed time and messages, and each
// of its slices' CPU per message (for COMPARE_CPU_STATS).
type cpuTotal struct {
	cpu, el time.Duration
	n       int64
	slices  []float64 // µs per message
}

// sendFrames encodes cpuOrders SEND_MESSAGE requests per queue, as
// rocketmq-client-go v2.1.2 encodes a single-message send: code 10, the
// long header names, a JSON header, the properties that client sets, and
// the header's extFields members in Go's map order, a different order in
// almost every request (that client ranges over its map to write them).
// The frames are sent in turn, so no two requests in a row have the same
// header text.
func sendFrames(size, queues int) ([][]byte, error) {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	shuffle := rand.New(rand.NewPCG(1, 2)) // the same orders in every run
	var frames [][]byte
	for i := range queues * cpuOrders {
		q := i % queues
		props := string(record.AppendProperties(nil, record.Properties{
			{Key: record.PropertyUniqueClientMessageIDKeyIndex, Value: fmt.Sprintf("7F0000010001%020X", q)},
			{Key: record.PropertyWaitStoreMsgOK, Value: "true"},
			{Key: record.PropertyTags, Value: "tag"},
		}))
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "cpu-producers", Topic: "CPU", DefaultTopic: broker.AutoCreateTopicKey,
			DefaultTopicQueueNums: int32(queues), QueueID: int32(q), BornTimestamp: time.Now().UnixMilli(), Properties: props}
		f, err := mapOrderSendFrame(h, body, shuffle)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
	}
	return frames, nil
}

// cpuOrders is how many orders of its header's members sendFrames gives
// each queue's request.
const cpuOrders = 8

// mapOrderSendFrame encodes a SEND_MESSAGE frame of h and body as
// rocketmq-client-go v2.1.2 writes it: the header's top-level members in
// its struct's order and the extFields members in an order drawn from
// shuffle, each value a JSON string.
func mapOrderSendFrame(h *protocol.SendMessageRequestHeader, body []byte, shuffle *rand.Rand) ([]byte, error) {
	req := protocol.NewRequest(protocol.SendMessage, h, body)
	fields := req.ExtFields
	keys := slices.Sorted(maps.Keys(fields))
	shuffle.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	hdr := []byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{`)
	for i, k := range keys {
		if i > 0 {
			hdr = append(hdr, ',')
		}
		kv, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(fields[k])
		if err != nil {
			return nil, err
		}
		hdr = append(append(append(hdr, kv...), ':'), v...)
	}
	hdr = append(hdr, "}}"...)
	f := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)+len(body)))
	f = binary.BigEndian.AppendUint32(f, uint32(len(hdr))) // serialize type 0: JSON
	f = append(append(f, hdr...), body...)
	if _, err := protocol.DecodeFrame(f[4:]); err != nil {
		return nil, fmt.Errorf("a send frame in map order: %w", err)
	}
	return f, nil
}

// sendResponseFrame is a typical broker answer to one of sendFrames'
// requests: what the plain TCP server writes back.
func sendResponseFrame() ([]byte, error) {
	resp := protocol.NewResponse(protocol.Success, "").SetHeader(&protocol.SendMessageResponseHeader{
		MsgID: strings.Repeat("7F00000100002A9F", 2), QueueID: 3, QueueOffset: 123456, Region: "DefaultRegion", TraceOn: true})
	resp.Opaque = 1
	return protocol.EncodeFrame(resp)
}

// frameLoad sends count requests (frames in turn) over conns connections,
// window in flight on each, each with its own write, and reads the
// responses, which must be SUCCESS.
func frameLoad(addr string, frames [][]byte, conns, window int, count int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	errc := make(chan error, conns)
	for i := range int64(conns) {
		per := count / int64(conns)
		if i < count%int64(conns) {
			per++
		}
		go func() { errc <- frameConn(ctx, addr, frames, window, per) }()
	}
	var first error
	for range conns {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// frameConn is one connection of frameLoad: n requests and their answers.
func frameConn(ctx context.Context, addr string, frames [][]byte, window int, n int64) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	credit := make(chan struct{}, window)
	go func() {
		for i := range n {
			select {
			case credit <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if _, err := nc.Write(frames[i%int64(len(frames))]); err != nil {
				return // the reader fails
			}
		}
	}()
	r := bufio.NewReaderSize(nc, 64<<10)
	var word [4]byte
	buf := make([]byte, 4096)
	for range n {
		if _, err := io.ReadFull(r, word[:]); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		fl := int(binary.BigEndian.Uint32(word[:]))
		if fl > len(buf) {
			buf = make([]byte, fl)
		}
		if _, err := io.ReadFull(r, buf[:fl]); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		resp, err := protocol.DecodeFrame(buf[:fl])
		if err != nil {
			return err
		}
		if resp.Code != protocol.Success {
			return fmt.Errorf("response %d: %s", resp.Code, resp.Remark)
		}
		<-credit
	}
	return nil
}

// jsLoad publishes to a JetStream stream over conns connections.
type jsLoad struct {
	ncs    []*nats.Conn
	js     []jetstream.JetStream
	window int
	failed atomic.Int64 // publishes whose ack was an error
}

func newJSLoad(url string, conns, window int) (*jsLoad, error) {
	l := &jsLoad{window: window}
	for range conns {
		nc, err := nats.Connect(url)
		if err != nil {
			l.close()
			return nil, err
		}
		l.ncs = append(l.ncs, nc)
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { l.failed.Add(1) }))
		if err != nil {
			l.close()
			return nil, err
		}
		l.js = append(l.js, js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.js[0].CreateStream(ctx, jetstream.StreamConfig{Name: "CPU", Subjects: []string{"cpu"}, Storage: jetstream.FileStorage}); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

func (l *jsLoad) run(count int64, size int) error {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var issued, failed atomic.Int64
	l.failed.Store(0)
	var wg sync.WaitGroup
	for _, js := range l.js {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for issued.Add(1) <= count {
				if _, err := js.PublishAsync("cpu", body, jetstream.WithStallWait(time.Minute)); err != nil {
					failed.Add(1)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := failed.Load() + l.failed.Load(); n > 0 {
		return fmt.Errorf("%d publishes failed", n)
	}
	return nil
}

func (l *jsLoad) close() {
	for _, nc := range l.ncs {
		nc.Close()
	}
}

// cpuServer is a server process started by startCPUServer.
type cpuServer struct {
	cmd   *exec.Cmd
	stdin io.Closer
	pid   int
	addr  string
	dir   string // its store, removed once it exited
}

// startCPUServer executes bin (this test binary, or another build of it)
// as the server sys (see TestMain) and waits for its address.
func startCPUServer(tb testing.TB, bin, sys string, env map[string]string) *cpuServer {
	tb.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	// Each server's files go once it has exited, not at the benchmark's
	// end: on a VM that hands freed memory back to its host (free page
	// reporting), a server whose page cache grows after an earlier one's
	// has to fault fresh memory in and pays for it, so a server's place
	// in the run would count. Removed at once, the next server's page
	// cache mostly takes pages just freed.
	dir, err := os.MkdirTemp("", "compare-cpu-"+sys)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) }) // after stop (cleanups run last first)
	cmd.Env = append(os.Environ(), "COMPARE_CPU_SERVER="+sys, "COMPARE_CPU_DIR="+dir)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &cpuServer{cmd: cmd, stdin: in, pid: cmd.Process.Pid, dir: dir}
	tb.Cleanup(func() { s.stop(tb) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("%s server: %v", sys, err)
	}
	s.addr = strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	return s
}

// stop closes the server's stdin (it exits), waits for it and removes
// its files.
func (s *cpuServer) stop(tb testing.TB) {
	if s.stdin == nil {
		return
	}
	s.stdin.Close()
	s.stdin = nil
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("server process: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		tb.Errorf("server process did not exit")
	}
	if err := os.RemoveAll(s.dir); err != nil {
		tb.Errorf("server files: %v", err)
	}
}

// TestMain runs the server of BenchmarkServerCPUPerMessage when this
// binary is started as one.
func TestMain(m *testing.M) {
	if sys := os.Getenv("COMPARE_CPU_SERVER"); sys != "" {
		if err := runCPUServer(sys, os.Getenv("COMPARE_CPU_DIR")); err != nil {
			fmt.Fprintf(os.Stderr, "%s server: %v\n", sys, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCPUServer serves as sys until stdin is closed. With
// COMPARE_CPU_PROFILE set it writes a CPU profile of the whole process to
// that file (sys replacing "%s"), with COMPARE_CPU_ALLOCS an allocation
// profile.
func runCPUServer(sys, dir string) error {
	if p := os.Getenv("COMPARE_CPU_PROFILE"); p != "" {
		f, err := os.Create(strings.ReplaceAll(p, "%s", sys))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("COMPARE_CPU_ALLOCS"); p != "" {
		runtime.MemProfileRate = 4 << 10
		defer func() {
			if f, err := os.Create(strings.ReplaceAll(p, "%s", sys)); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	var addr string
	var stop func()
	switch sys {
	case "smartgo":
		so := store.DefaultOptions(filepath.Join(dir, "store"))
		so.SegmentSize = 256 << 20
		b, err := broker.New(broker.Options{ListenAddr: "127.0.0.1:0", BrokerName: "cpu", ClusterName: "cpu",
			AutoCreateTopic: true, AutoCreateGroup: true, Store: so})
		if err != nil {
			return err
		}
		addr, stop = b.Addr(), func() { b.Close() }
	case "jetstream":
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
		if err != nil {
			return err
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			return errors.New("nats-server not ready")
		}
		addr, stop = srv.ClientURL(), srv.Shutdown
	case "tcp":
		n, err := strconv.Atoi(os.Getenv("COMPARE_CPU_RESPONSE_LEN"))
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go echoServe(ln, n)
		addr, stop = ln.Addr().String(), func() { ln.Close() }
	default:
		return fmt.Errorf("unknown server %q", sys)
	}
	fmt.Printf("ADDR %s\n", addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
	return nil
}

// echoServe answers every frame it reads on a connection with a
// SUCCESS response frame of n bytes (the length word included); the
// answers to the requests one read brought are written together.
func echoServe(ln net.Listener, n int) {
	resp := protocol.NewResponse(protocol.Success, "")
	resp.Opaque = 1
	base, _ := protocol.EncodeFrame(resp)
	// Pad the remark so the frame is n bytes.
	if pad := n - len(base); pad > 0 {
		resp.Remark = strings.Repeat("x", pad)
		base, _ = protocol.EncodeFrame(resp)
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer nc.Close()
			r := bufio.NewReaderSize(nc, 64<<10)
			w := bufio.NewWriterSize(nc, 64<<10)
			var word [4]byte
			buf := make([]byte, 4096)
			for {
				if !wholeFrame(r) && w.Buffered() > 0 {
					if err := w.Flush(); err != nil {
						return
					}
				}
				if _, err := io.ReadFull(r, word[:]); err != nil {
					return
				}
				fl := int(binary.BigEndian.Uint32(word[:]))
				if fl > len(buf) {
					buf = make([]byte, fl)
				}
				if _, err := io.ReadFull(r, buf[:fl]); err != nil {
					return
				}
				if _, err := w.Write(base); err != nil {
					return
				}
			}
		}()
	}
}

// wholeFrame reports whether r has a whole frame buffered.
func wholeFrame(r *bufio.Reader) bool {
	if r.Buffered() < 4 {
		return false
	}
	word, err := r.Peek(4) // buffered: does not block
	if err != nil {
		return false
	}
	return r.Buffered() >= 4+int(binary.BigEndian.Uint32(word))
}
