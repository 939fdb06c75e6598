package mqtt

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Fan-out benchmark: one publisher, fanSubs subscribers, QoS 0 and 1,
// SmartGo (this engine, MemoryBackend) against mosquitto and against a raw
// relay (the loopback floor: the publisher's packets copied to every
// subscriber socket, no MQTT logic), one after the other in one run. For
// repeated, interleaved numbers run the whole benchmark several times
// (-count would repeat each leaf back to back):
//
//	go test -c -o /tmp/mqtt.test ./mqtt
//	for i in 1 2 3; do /tmp/mqtt.test -test.run '^$' -test.bench MQTTFanout -test.benchtime 3s; done
//
// It is open loop. The subscribers live in a child process (this test
// binary re-executed with SMARTGO_FANOUT_RECV set): raw sockets that decode
// only the PUBLISH framing, take the time once per read and histogram
// now minus the send time carried in the first 8 payload bytes; QoS 1
// PUBACKs for a read go out in one write. The publisher stamps each
// message with the time it was scheduled to leave, not when it left, so a
// server that falls behind is charged for the wait (no coordinated
// omission).
//
//	rate=N      b.N messages at N msgs/s (SMARTGO_FANOUT_RATE, default
//	            fanRate), below saturation: p50/p99/max latency in µs and
//	            the share of deliveries lost (QoS 0 may drop).
//	saturation  b.N messages as fast as the publisher's socket takes them
//	            (QoS 1: at most 256 unacknowledged): deliveries per second
//	            received, from the first send to the last delivery.

const (
	fanSubs    = 1000
	fanRate    = 10 // messages per second (x1000 deliveries), below saturation
	fanPayload = 64
	fanTopic   = "fan/t"
)

func init() {
	if spec := os.Getenv("SMARTGO_FANOUT_RECV"); spec != "" {
		if err := fanReceiver(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// fanHist is a latency histogram in microseconds: 10 µs buckets below
// 1 ms, 100 µs below 100 ms, 10 ms below 60 s (the last bucket holds the
// rest). Safe for concurrent use.
type fanHist struct {
	b     [100 + 990 + 5990]atomic.Int64
	n     atomic.Int64
	max   atomic.Int64
	first atomic.Int64 // UnixNano of the first delivery
	last  atomic.Int64 // UnixNano of the last delivery
}

func fanBucket(us int64) int {
	switch {
	case us < 0:
		return 0
	case us < 1000:
		return int(us / 10)
	case us < 100_000:
		return 100 + int((us-1000)/100)
	}
	return min(100+990+int((us-100_000)/10_000), 100+990+5990-1)
}

// fanBucketTop is the upper bound (µs) of bucket i.
func fanBucketTop(i int) int64 {
	switch {
	case i < 100:
		return int64(i+1) * 10
	case i < 1090:
		return 1000 + int64(i-100+1)*100
	}
	return 100_000 + int64(i-1090+1)*10_000
}

func (h *fanHist) reset() {
	for i := range h.b {
		h.b[i].Store(0)
	}
	h.n.Store(0)
	h.max.Store(0)
	h.first.Store(0)
	h.last.Store(0)
}

func (h *fanHist) add(now int64, lat []int64) {
	if len(lat) == 0 {
		return
	}
	for _, us := range lat {
		h.b[fanBucket(us)].Add(1)
		for m := h.max.Load(); us > m && !h.max.CompareAndSwap(m, us); m = h.max.Load() {
		}
	}
	h.n.Add(int64(len(lat)))
	h.first.CompareAndSwap(0, now)
	for l := h.last.Load(); now > l && !h.last.CompareAndSwap(l, now); l = h.last.Load() {
	}
}

func (h *fanHist) quantile(q float64) int64 {
	n := h.n.Load()
	want := int64(q*float64(n-1)) + 1
	var seen int64
	for i := range h.b {
		seen += h.b[i].Load()
		if seen >= want {
			return fanBucketTop(i)
		}
	}
	return h.max.Load()
}

// fanReceiver is the child process: spec is "addr,qos,n". It connects n
// v3.1.1 subscribers to fanTopic, prints "ready", then answers commands
// on in: "reset" (clear the histogram), "wait <want> <quiet ms>" (until
// want deliveries or no delivery for quiet ms) and "report", answered
// with "report <n> <first> <last> <p50> <p99> <max>".
func fanReceiver(spec string, in io.Reader, out io.Writer) error {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		return fmt.Errorf("bad spec %q", spec)
	}
	addr := f[0]
	qos, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || qos < 0 || qos > 1 || n < 1 {
		return fmt.Errorf("bad spec %q", spec)
	}
	var h fanHist
	conns := make([]net.Conn, n)
	for i := range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		conns[i] = nc
		b, err := packets.AppendPacket(nil, &packets.Connect{ClientID: "fan-" + strconv.Itoa(i), CleanStart: true}, packets.Version311)
		if err != nil {
			return err
		}
		b, err = packets.AppendPacket(b, &packets.Subscribe{PacketID: 1, Subscriptions: []packets.Subscription{{Filter: fanTopic, QoS: byte(qos)}}}, packets.Version311)
		if err != nil {
			return err
		}
		if _, err := nc.Write(b); err != nil {
			return err
		}
	}
	// CONNACK (4 bytes) and SUBACK (5 bytes) come back first.
	for i, nc := range conns {
		var ack [9]byte
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(nc, ack[:]); err != nil || ack[0] != 0x20 || ack[3] != 0 || ack[4] != 0x90 || ack[8] >= 0x80 {
			return fmt.Errorf("subscriber %d: CONNACK/SUBACK % x: %v", i, ack, err)
		}
		nc.SetReadDeadline(time.Time{})
	}
	for _, nc := range conns {
		go fanRead(nc, &h)
	}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd := strings.Fields(sc.Text())
		if len(cmd) == 0 {
			continue
		}
		switch cmd[0] {
		case "reset":
			h.reset()
			fmt.Fprintln(out, "ok")
		case "wait":
			if len(cmd) != 3 {
				return fmt.Errorf("bad command %q", sc.Text())
			}
			want, err1 := strconv.ParseInt(cmd[1], 10, 64)
			quiet, err2 := strconv.Atoi(cmd[2])
			if err1 != nil || err2 != nil {
				return fmt.Errorf("bad command %q", sc.Text())
			}
			last, lastAt := h.n.Load(), time.Now()
			for h.n.Load() < want {
				time.Sleep(2 * time.Millisecond)
				if cur := h.n.Load(); cur != last {
					last, lastAt = cur, time.Now()
				} else if time.Since(lastAt) > time.Duration(quiet)*time.Millisecond {
					break
				}
			}
			fallthrough
		case "report":
			fmt.Fprintf(out, "report %d %d %d %d %d %d\n", h.n.Load(), h.first.Load(), h.last.Load(),
				h.quantile(0.50), h.quantile(0.99), h.max.Load())
		}
	}
	return nil
}

// fanRead reads one subscriber's socket: it timestamps each read, decodes
// the PUBLISH framing and acknowledges QoS 1 in one write per read.
func fanRead(nc net.Conn, h *fanHist) {
	buf := make([]byte, 32<<10)
	var have int
	var lat []int64
	var acks []byte
	for {
		k, err := nc.Read(buf[have:])
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		have += k
		lat, acks = lat[:0], acks[:0]
		p := 0
		for {
			if have-p < 2 {
				break
			}
			rl, hl, ok := fanVarint(buf[p+1 : have])
			if !ok || have-p < 1+hl+rl {
				break
			}
			body := buf[p+1+hl : p+1+hl+rl]
			if buf[p]>>4 == 3 { // PUBLISH
				qos := (buf[p] >> 1) & 3
				tl := int(binary.BigEndian.Uint16(body))
				off := 2 + tl
				if qos > 0 {
					acks = append(acks, 0x40, 2, body[off], body[off+1])
					off += 2
				}
				if len(body) >= off+8 {
					sent := int64(binary.BigEndian.Uint64(body[off:]))
					lat = append(lat, (now-sent)/1000)
				}
			}
			p += 1 + hl + rl
		}
		copy(buf, buf[p:have])
		have -= p
		if have == len(buf) {
			return // a packet larger than the buffer: not ours
		}
		h.add(now, lat)
		if len(acks) > 0 {
			if _, err := nc.Write(acks); err != nil {
				return
			}
		}
	}
}

// fanVarint decodes an MQTT remaining length: value, its size, ok.
func fanVarint(b []byte) (int, int, bool) {
	v, mul := 0, 1
	for i := 0; i < 4 && i < len(b); i++ {
		v += int(b[i]&0x7F) * mul
		if b[i]&0x80 == 0 {
			return v, i + 1, true
		}
		mul <<= 7
	}
	return 0, 0, false
}

// fanChild is the running receiver process.
type fanChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startFanChild(b *testing.B, addr string, qos byte) *fanChild {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SMARTGO_FANOUT_RECV="+addr+","+strconv.Itoa(int(qos))+","+strconv.Itoa(fanSubs))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &fanChild{cmd: cmd, in: in, out: bufio.NewScanner(outp)}
	b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if line := c.line(b); line != "ready" {
		b.Fatalf("receiver: %q", line)
	}
	return c
}

func (c *fanChild) line(b *testing.B) string {
	b.Helper()
	if !c.out.Scan() {
		b.Fatalf("receiver exited: %v", c.out.Err())
	}
	return c.out.Text()
}

type fanReport struct {
	n, first, last, p50, p99, max int64
}

func (c *fanChild) do(b *testing.B, cmd string) fanReport {
	b.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		b.Fatal(err)
	}
	line := c.line(b)
	if cmd == "reset" {
		if line != "ok" {
			b.Fatalf("receiver: %q", line)
		}
		return fanReport{}
	}
	var r fanReport
	if _, err := fmt.Sscanf(line, "report %d %d %d %d %d %d", &r.n, &r.first, &r.last, &r.p50, &r.p99, &r.max); err != nil {
		b.Fatalf("receiver: %q: %v", line, err)
	}
	return r
}

// fanPublisher is a raw v3.1.1 publisher; for QoS 1 a goroutine counts
// the PUBACKs.
type fanPublisher struct {
	nc    net.Conn
	qos   byte
	pkt   []byte // PUBLISH template
	tsOff int    // where the send time goes
	idOff int    // where the packet id goes (QoS 1)
	id    uint16
	acked atomic.Int64
	sent  int64
}

func newFanPublisher(b *testing.B, addr string, qos byte) *fanPublisher {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	cb, err := packets.AppendPacket(nil, &packets.Connect{ClientID: "fan-pub", CleanStart: true}, packets.Version311)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := nc.Write(cb); err != nil {
		b.Fatal(err)
	}
	var ack [4]byte
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(nc, ack[:]); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		b.Fatalf("publisher CONNACK % x: %v", ack, err)
	}
	nc.SetReadDeadline(time.Time{})
	p := &fanPublisher{nc: nc, qos: qos}
	pub := &packets.Publish{Topic: fanTopic, QoS: qos, Payload: make([]byte, fanPayload)}
	if qos > 0 {
		pub.PacketID = 0xFFFF
	}
	if p.pkt, err = packets.AppendPacket(nil, pub, packets.Version311); err != nil {
		b.Fatal(err)
	}
	p.tsOff = len(p.pkt) - fanPayload
	p.idOff = p.tsOff - 2
	if qos > 0 {
		if p.pkt[p.idOff] != 0xFF || p.pkt[p.idOff+1] != 0xFF {
			b.Fatal("PUBLISH template: packet id not where expected")
		}
		go func() {
			r := bufio.NewReader(nc)
			var a [4]byte
			for {
				if _, err := io.ReadFull(r, a[:]); err != nil {
					return
				}
				if a[0] == 0x40 {
					p.acked.Add(1)
				}
			}
		}()
	}
	return p
}

// send writes one PUBLISH stamped with at (UnixNano).
func (p *fanPublisher) send(b *testing.B, at int64) {
	binary.BigEndian.PutUint64(p.pkt[p.tsOff:], uint64(at))
	if p.qos > 0 {
		p.id++
		if p.id == 0 {
			p.id = 1
		}
		binary.BigEndian.PutUint16(p.pkt[p.idOff:], p.id)
	}
	if _, err := p.nc.Write(p.pkt); err != nil {
		b.Fatalf("publish: %v", err)
	}
	p.sent++
}

// fanServer starts one of the servers under test and returns its address.
func fanServer(b *testing.B, kind string) string {
	switch kind {
	case "smartgo":
		return startServer(b, nil).addr
	case "mosquitto":
		return startMosquitto(b)
	case "relay":
		return startRelay(b)
	}
	b.Fatalf("unknown server %q", kind)
	return ""
}

func BenchmarkMQTTFanout(b *testing.B) {
	rate := fanRate
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_FANOUT_RATE")); err == nil && v > 0 {
		rate = v
	}
	for _, qos := range []byte{0, 1} {
		for _, kind := range []string{"smartgo", "mosquitto", "relay"} {
			if kind == "relay" && qos > 0 {
				continue // the relay does not acknowledge
			}
			b.Run(fmt.Sprintf("qos=%d/%s", qos, kind), func(b *testing.B) {
				addr := fanServer(b, kind)
				child := startFanChild(b, addr, qos)
				pub := newFanPublisher(b, addr, qos)
				b.Run("rate="+strconv.Itoa(rate), func(b *testing.B) { fanFixedRate(b, child, pub, rate) })
				b.Run("saturation", func(b *testing.B) { fanSaturation(b, child, pub) })
			})
		}
	}
}

// fanFixedRate publishes b.N messages at rate per second and reports the
// latency of every delivery.
func fanFixedRate(b *testing.B, child *fanChild, pub *fanPublisher, rate int) {
	child.do(b, "reset")
	interval := time.Second / time.Duration(rate)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		pub.send(b, at.UnixNano())
	}
	want := int64(b.N) * fanSubs
	r := child.do(b, fmt.Sprintf("wait %d 2000", want))
	b.StopTimer()
	if r.n == 0 {
		b.Fatal("no deliveries")
	}
	b.ReportMetric(float64(r.p50), "p50-µs")
	b.ReportMetric(float64(r.p99), "p99-µs")
	b.ReportMetric(float64(r.max), "max-µs")
	b.ReportMetric(100*float64(want-r.n)/float64(want), "lost-%")
	b.ReportMetric(0, "ns/op")
}

// fanSaturation publishes b.N messages as fast as possible (QoS 1: at
// most 256 unacknowledged) and reports the deliveries per second.
func fanSaturation(b *testing.B, child *fanChild, pub *fanPublisher) {
	child.do(b, "reset")
	const window = 256
	b.SetBytes(fanPayload * fanSubs)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for pub.qos > 0 && pub.sent-pub.acked.Load() >= window {
			time.Sleep(50 * time.Microsecond)
		}
		pub.send(b, time.Now().UnixNano())
	}
	want := int64(b.N) * fanSubs
	r := child.do(b, fmt.Sprintf("wait %d 1000", want))
	b.StopTimer()
	if r.n == 0 {
		b.Fatal("no deliveries")
	}
	el := time.Duration(r.last - start.UnixNano())
	b.ReportMetric(float64(r.n)/el.Seconds(), "deliveries/s")
	b.ReportMetric(100*float64(want-r.n)/float64(want), "lost-%")
	b.ReportMetric(float64(r.p99), "p99-µs")
}

// startRelay runs the raw fan-out floor: no MQTT server, a relay that
// answers CONNECT and SUBSCRIBE with fixed CONNACK/SUBACK bytes and copies
// each whole packet the publisher (client id fan-pub) sends to every other
// connection, through a 1024-packet channel and a writer goroutine per
// socket (a full channel drops the packet, as QoS 0 may).
func startRelay(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var subs []chan []byte
	var conns []net.Conn
	var wg sync.WaitGroup
	done := make(chan struct{})
	b.Cleanup(func() {
		l.Close()
		close(done)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	readPacket := func(r *bufio.Reader) ([]byte, error) {
		var pk []byte
		c, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		pk = append(pk, c)
		n, mul := 0, 1
		for i := 0; ; i++ {
			c, err := r.ReadByte()
			if err != nil {
				return nil, err
			}
			pk = append(pk, c)
			n += int(c&0x7F) * mul
			mul <<= 7
			if c&0x80 == 0 {
				break
			}
			if i == 3 {
				return nil, fmt.Errorf("bad remaining length")
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		return append(pk, body...), nil
	}
	serve := func(nc net.Conn) {
		r := bufio.NewReaderSize(nc, 64<<10)
		pk, err := readPacket(r)
		if err != nil || pk[0] != 0x10 {
			return
		}
		if _, err := nc.Write([]byte{0x20, 2, 0, 0}); err != nil {
			return
		}
		if strings.Contains(string(pk), "fan-pub") {
			for {
				pk, err := readPacket(r)
				if err != nil {
					return
				}
				mu.Lock()
				for _, s := range subs {
					select {
					case s <- pk:
					default:
					}
				}
				mu.Unlock()
			}
		}
		pk, err = readPacket(r)
		if err != nil || pk[0] != 0x82 || len(pk) < 4 {
			return
		}
		if _, err := nc.Write([]byte{0x90, 3, pk[2], pk[3], 0}); err != nil {
			return
		}
		ch := make(chan []byte, 1024)
		mu.Lock()
		subs = append(subs, ch)
		mu.Unlock()
		for {
			select {
			case <-done:
				return
			case m := <-ch:
				if _, err := nc.Write(m); err != nil {
					return
				}
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serve(nc)
			}()
		}
	}()
	return l.Addr().String()
}
