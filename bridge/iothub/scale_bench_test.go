//go:build cluster

package iothub

// Fleet-scale benchmarks against a real `smartgo standalone` process with
// the IoT hub in development mode (make iothub-bench). The devices live in
// this process, the hub in the child, so each side stays under the 20,000
// open files a process may hold; device connections come from 127.0.0.x
// source addresses spread over 250 of them.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/mqtt/packets"
	"github.com/smartgo/smartgo/statestore"
)

// benchHub is a running standalone process with the hub.
type benchHub struct {
	mqtt     string // plain MQTT listener
	registry string
}

func startBenchHub(b *testing.B) *benchHub {
	b.Helper()
	dir := b.TempDir()
	ports := testnet.FreePorts(b, 3)
	h := &benchHub{registry: fmt.Sprintf("127.0.0.1:%d", ports[0]), mqtt: fmt.Sprintf("127.0.0.1:%d", ports[2])}
	cfg := `
[iothub]
enabled = true
device_auth = "none"
twin_rate = 0
`
	cfgFile := filepath.Join(dir, "smartgo.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	logFile := filepath.Join(dir, "smartgo.log")
	logf, err := os.Create(logFile)
	if err != nil {
		b.Fatal(err)
	}
	bin := testnet.SmartgoBinary(b, filepath.Join("..", ".."))
	cmd := exec.Command(bin, "standalone", "-c", cfgFile, "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen="+h.registry, "-set", fmt.Sprintf("broker.listen=127.0.0.1:%d", ports[1]),
		"-set", "bridge.listen=0.0.0.0:"+strconv.Itoa(ports[2]), "-set", "console.listen=", "-set", "store.segment_size=256MiB", "-set", "amqp.listen=")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(logFile)
		if strings.Contains(string(data), "iothub started") {
			return h
		}
		if strings.Contains(string(data), "level=ERROR") || time.Now().After(deadline) {
			b.Fatalf("smartgo did not start:\n%s", data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchConn is a minimal MQTT client: one reader goroutine, PUBLISHes
// handed to onPub (whose arguments are valid during the call only),
// QoS 1 acknowledged.
type benchConn struct {
	nc    net.Conn
	v     packets.Version
	wmu   sync.Mutex
	wbuf  []byte
	acks  chan packets.Packet
	onPub func(*packets.Publish)
	done  chan struct{}
}

// localAddr spreads connections over 127.0.0.2 ... 127.0.0.251.
func localAddr(i int) *net.TCPAddr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%250))}
}

func dialBench(addr string, i int, v packets.Version, cp *packets.Connect, onPub func(*packets.Publish)) (*benchConn, error) {
	d := net.Dialer{LocalAddr: localAddr(i), Timeout: 30 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &benchConn{nc: nc, v: v, acks: make(chan packets.Packet, 4), onPub: onPub, done: make(chan struct{})}
	go c.readLoop()
	if err := c.send(cp); err != nil {
		nc.Close()
		return nil, err
	}
	p, err := c.ack(30 * time.Second)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if ca, ok := p.(*packets.Connack); !ok || ca.ReasonCode != 0 {
		nc.Close()
		return nil, fmt.Errorf("connect %s: %T %+v", cp.ClientID, p, p)
	}
	return c, nil
}

func (c *benchConn) send(p packets.Packet) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	c.wbuf, err = packets.AppendPacket(c.wbuf[:0], p, c.v)
	if err != nil {
		return err
	}
	_, err = c.nc.Write(c.wbuf)
	return err
}

func (c *benchConn) ack(timeout time.Duration) (packets.Packet, error) {
	select {
	case p := <-c.acks:
		return p, nil
	case <-c.done:
		return nil, errors.New("connection closed")
	case <-time.After(timeout):
		return nil, errors.New("no acknowledgement")
	}
}

func (c *benchConn) subscribe(qos byte, filters ...string) error {
	var subs []packets.Subscription
	for _, f := range filters {
		subs = append(subs, packets.Subscription{Filter: f, QoS: qos})
	}
	if err := c.send(&packets.Subscribe{PacketID: 1, Subscriptions: subs}); err != nil {
		return err
	}
	p, err := c.ack(30 * time.Second)
	if err != nil {
		return err
	}
	sa, ok := p.(*packets.Suback)
	if !ok || slices.ContainsFunc(sa.ReasonCodes, func(r packets.ReasonCode) bool { return r >= 0x80 }) {
		return fmt.Errorf("subscribe %v: %T %+v", filters, p, p)
	}
	return nil
}

func (c *benchConn) readLoop() {
	defer close(c.done)
	var dec packets.Decoder
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 32<<10)
	for {
		n, err := c.nc.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for len(buf) > 0 {
			p, used, derr := dec.Next(c.v, buf)
			if derr != nil {
				if errors.Is(derr, packets.ErrIncomplete) {
					break
				}
				return
			}
			switch p := p.(type) {
			case *packets.Publish:
				if p.QoS == 1 {
					_ = c.send(&packets.Puback{PacketID: p.PacketID})
				}
				c.onPub(p)
			case *packets.Connack, *packets.Suback:
				c.acks <- p
			}
			buf = buf[used:]
		}
		buf = append(tmp[:0:0], buf...) // keep the unread rest only
		if err != nil {
			return
		}
	}
}

func (c *benchConn) close() {
	_ = c.send(&packets.Disconnect{})
	c.nc.Close()
	<-c.done
}

// connectAll connects n clients with conc dials at a time.
func connectAll(b *testing.B, n, conc int, dial func(i int) (*benchConn, error)) []*benchConn {
	b.Helper()
	conns := make([]*benchConn, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				c, err := dial(i)
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("client %d: %w", i, err))
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	b.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	})
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	return conns
}

// phase runs one closed-loop request per client until d passes and
// returns the round trips per second and the latencies' p50 and p99.
func phase(b *testing.B, n int, d time.Duration, roundTrip func(i, seq int) error) (rate float64, p50, p99 time.Duration) {
	b.Helper()
	lat := make([][]time.Duration, n)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			for seq := 0; time.Now().Before(end); seq++ {
				t0 := time.Now()
				if err := roundTrip(i, seq); err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("client %d: %w", i, err))
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("no round trip finished")
	}
	return float64(len(all)) / elapsed.Seconds(), all[len(all)/2], all[len(all)*99/100]
}

// waitResp waits for the answer a client's reader put in ch.
func waitResp(ch chan string, want string) error {
	select {
	case got := <-ch:
		if !strings.HasPrefix(got, want) {
			return fmt.Errorf("answer %q, want %q", got, want)
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("no answer in 30 s")
	}
}

func deviceConnect(id string) *packets.Connect {
	return &packets.Connect{ClientID: id, KeepAlive: 300, UsernameFlag: true,
		Username: "bench.smartgo.test/" + id + "/?api-version=2021-04-12"}
}

const (
	benchDevices = 1000
	benchPhase   = 10 * time.Second
)

// BenchmarkHubTwinRoundTrips: 1,000 connected devices each run twin
// reported PATCHes, then twin GETs, one at a time for 10 s (closed loop,
// QoS 0 requests as the SDKs send them); then 1,000 MQTT 5 state store
// clients run SETs, then GETs, for 10 s against the same process (QoS 1
// requests as the state store SDK sends them). Reported: round trips per
// second, p50 and p99 of each, and the twin/state-store ratios.
func BenchmarkHubTwinRoundTrips(b *testing.B) {
	h := startBenchHub(b)
	for range b.N {
		twinResp := make([]chan string, benchDevices)
		devs := connectAll(b, benchDevices, 32, func(i int) (*benchConn, error) {
			ch := make(chan string, 1)
			twinResp[i] = ch
			c, err := dialBench(h.mqtt, i, packets.Version311, deviceConnect(fmt.Sprintf("rt-%d", i)), func(p *packets.Publish) {
				if rest, ok := strings.CutPrefix(p.Topic, twinResTopicPrefix); ok {
					ch <- rest
				}
			})
			if err == nil {
				err = c.subscribe(0, twinResFilter)
			}
			return c, err
		})
		patch := func(i, seq int) error {
			body := fmt.Appendf(nil, `{"seq":%d,"temperature":21.5,"battery":{"level":80}}`, seq)
			if err := devs[i].send(&packets.Publish{Topic: "$iothub/twin/PATCH/properties/reported/?$rid=" + strconv.Itoa(seq), Payload: body}); err != nil {
				return err
			}
			return waitResp(twinResp[i], "204/?$rid="+strconv.Itoa(seq)+"&")
		}
		get := func(i, seq int) error {
			if err := devs[i].send(&packets.Publish{Topic: "$iothub/twin/GET/?$rid=g" + strconv.Itoa(seq)}); err != nil {
				return err
			}
			return waitResp(twinResp[i], "200/?$rid=g"+strconv.Itoa(seq))
		}
		patchRate, patch50, patch99 := phase(b, benchDevices, benchPhase, patch)
		getRate, get50, get99 := phase(b, benchDevices, benchPhase, get)

		ssResp := make([]chan string, benchDevices)
		ss := connectAll(b, benchDevices, 32, func(i int) (*benchConn, error) {
			ch := make(chan string, 1)
			ssResp[i] = ch
			cp := &packets.Connect{ClientID: fmt.Sprintf("ss-%d", i), CleanStart: true, KeepAlive: 300}
			c, err := dialBench(h.mqtt, i, packets.Version5, cp, func(p *packets.Publish) {
				if len(p.Properties.CorrelationData) == 16 {
					ans := strconv.FormatUint(binary.BigEndian.Uint64(p.Properties.CorrelationData), 10) + " " + string(p.Payload)
					if len(p.Payload) == 0 {
						ans += fmt.Sprint(p.Properties.User)
					}
					ch <- ans
				}
			})
			if err == nil {
				err = c.subscribe(0, fmt.Sprintf("clients/ss-%d/response", i))
			}
			return c, err
		})
		// A request as the state store SDKs send it: QoS 1, a response
		// topic, 16 bytes of correlation data, an expiry, and on SET the
		// client's clock in __ts.
		ssReq := func(i, seq int, payload []byte, want string) error {
			pub := &packets.Publish{Topic: statestore.RequestTopic, QoS: 1, PacketID: uint16(seq%60000 + 1), Payload: payload}
			pub.Properties.Present.Add(packets.PropResponseTopic)
			pub.Properties.ResponseTopic = fmt.Sprintf("clients/ss-%d/response", i)
			pub.Properties.Present.Add(packets.PropCorrelationData)
			pub.Properties.CorrelationData = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(seq)), uint64(i))
			pub.Properties.Present.Add(packets.PropMessageExpiry)
			pub.Properties.MessageExpiry = 30
			if bytes.Contains(payload, []byte("SET")) {
				pub.Properties.User = []packets.UserProperty{{Key: statestore.PropTimestamp,
					Value: fmt.Sprintf("%d:%d:ss-%d", time.Now().UnixMilli(), seq%65536, i)}}
			}
			if err := ss[i].send(pub); err != nil {
				return err
			}
			return waitResp(ssResp[i], strconv.Itoa(seq)+" "+want)
		}
		value := []byte(`{"seq":0,"temperature":21.5,"battery":{"level":80}}`)
		set := func(i, seq int) error {
			key := []byte("bench-" + strconv.Itoa(i))
			return ssReq(i, seq, statestore.AppendRequest(nil, []byte("SET"), key, value), "+OK")
		}
		ssGet := func(i, seq int) error {
			key := []byte("bench-" + strconv.Itoa(i))
			return ssReq(i, seq, statestore.AppendRequest(nil, []byte("GET"), key), "$")
		}
		setRate, set50, set99 := phase(b, benchDevices, benchPhase, set)
		ssGetRate, ssGet50, ssGet99 := phase(b, benchDevices, benchPhase, ssGet)

		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(patchRate, "patch_rt/s")
		b.ReportMetric(ms(patch50), "patch_p50_ms")
		b.ReportMetric(ms(patch99), "patch_p99_ms")
		b.ReportMetric(getRate, "get_rt/s")
		b.ReportMetric(ms(get50), "get_p50_ms")
		b.ReportMetric(ms(get99), "get_p99_ms")
		b.ReportMetric(setRate, "ss_set/s")
		b.ReportMetric(ms(set50), "ss_set_p50_ms")
		b.ReportMetric(ms(set99), "ss_set_p99_ms")
		b.ReportMetric(ssGetRate, "ss_get/s")
		b.ReportMetric(ms(ssGet50), "ss_get_p50_ms")
		b.ReportMetric(ms(ssGet99), "ss_get_p99_ms")
		b.ReportMetric(patchRate/setRate, "patch/set")
		b.ReportMetric(getRate/ssGetRate, "get/ss_get")
	}
}

// BenchmarkHubDesiredFanout10k: 10,000 devices connected (MQTT 3.1.1,
// persistent sessions, subscribed to desired changes as the SDKs are); a
// back end (the twin client, 64 requests at a time) updates every
// device's desired properties; reported: the time until every device has
// its notification, and the time the back end's updates took alone.
func BenchmarkHubDesiredFanout10k(b *testing.B) {
	const devices = 10000
	h := startBenchHub(b)
	tc, err := twincli.New(twincli.Options{Registries: []string{h.registry}, RequestTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tc.Close() })
	var got atomic.Int64
	var last atomic.Int64 // unix nanos of the latest first arrival
	seen := make([]atomic.Int32, devices)
	round := atomic.Int32{}
	connStart := time.Now()
	connectAll(b, devices, 64, func(i int) (*benchConn, error) {
		c, err := dialBench(h.mqtt, i, packets.Version311, deviceConnect(fmt.Sprintf("fan-%d", i)), func(p *packets.Publish) {
			if !strings.HasPrefix(p.Topic, desiredTopicPrefix) || !bytes.Contains(p.Payload, []byte(`"round"`)) {
				return
			}
			r := round.Load()
			if bytes.Contains(p.Payload, fmt.Appendf(nil, `"round":%d`, r)) && seen[i].Swap(r) != r {
				last.Store(time.Now().UnixNano())
				got.Add(1)
			}
		})
		if err == nil {
			err = c.subscribe(1, twinDesiredFilter, twinResFilter)
		}
		return c, err
	})
	b.Logf("%d devices connected in %v", devices, time.Since(connStart).Round(time.Millisecond))
	b.ResetTimer()
	for n := range b.N {
		r := int32(n + 1)
		round.Store(r)
		got.Store(0)
		patch := fmt.Appendf(nil, `{"round":%d,"config":{"interval":%d}}`, r, 10+n)
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		for range 64 {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= devices {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					_, err := tc.UpdateDesired(ctx, fmt.Sprintf("fan-%d", i), "", patch, 0)
					cancel()
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("update fan-%d: %w", i, err))
						return
					}
				}
			})
		}
		wg.Wait()
		updates := time.Since(start)
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Minute)
		for got.Load() < devices {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d devices got the desired change in 5 min", got.Load(), devices)
			}
			time.Sleep(10 * time.Millisecond)
		}
		all := time.Unix(0, last.Load()).Sub(start)
		b.ReportMetric(all.Seconds(), "s_all_have_it")
		b.ReportMetric(updates.Seconds(), "s_updates_alone")
		b.ReportMetric(float64(devices)/all.Seconds(), "devices/s")
	}
}
