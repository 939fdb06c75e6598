package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreBenchVsRedis compares the state store with Redis, in one
// run, with benchClients clients each doing benchPerClient requests of
// benchValue-byte values, one request in flight per client (like
// redis-benchmark without -P):
//
//   - smartgo: a `smartgo standalone` process built from this checkout
//     (the setup a user runs: registry, broker with the state store, MQTT
//     bridge whose state store front calls the broker in process), driven
//     by lean MQTT v5 clients in this process (mqtt/packets on plain
//     sockets, so the comparison is not one of load generators) run by one
//     event loop (loopStateStoreLoad), as redis-benchmark runs its clients;
//     GET is also measured with a goroutine per client (rawStateStoreLoad,
//     "smartgo GET goroutines"), which costs the shared CPU more.
//   - redis: redis-server, driven by redis-benchmark -c benchClients -d
//     benchValue -r 10000 -n (the same request count).
//
// Each round runs SmartGo SET, SmartGo GET (both generators), then
// redis-benchmark SET,GET;
// the test logs every round and the median and range of ops/s and p99 and
// of the GET and SET ratios. Durability: async flush (every 500 ms, like
// the default config) against Redis without persistence (--save "",
// --appendonly no); SMARTGO_SS_BENCH_SYNC=1 runs sync flush (a SET
// answers after fsync) against Redis with --appendonly yes --appendfsync
// always. With SMARTGO_SS_BENCH_PATHS=1 each round also measures the two
// front-to-broker paths inside this process (mqtt.Server + front + broker,
// no bridge backend): over loopback remoting (a bridge in its own process)
// and in process. SMARTGO_SS_BENCH_BASE_BIN=<smartgo binary> also runs
// that build's `smartgo standalone` in every round ("base"), e.g. the
// build before a change. SMARTGO_SS_BENCH_MIXED=1 adds a mixed load per
// round and server: half the clients SET while the other half GET ("mixed
// SET", "mixed GET"; with sync flush it shows whether GETs wait behind the
// SETs' fsync). Opt in with SMARTGO_SS_BENCH=1;
// SMARTGO_SS_BENCH_ROUNDS sets the rounds (default 3).
func TestStateStoreBenchVsRedis(t *testing.T) {
	if os.Getenv("SMARTGO_SS_BENCH") == "" {
		t.Skip("set SMARTGO_SS_BENCH=1 to run the benchmark")
	}
	const benchClients, benchValue, benchPerClient = 50, 100, 600
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("SMARTGO_SS_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	syncFlush := os.Getenv("SMARTGO_SS_BENCH_SYNC") != ""
	paths := os.Getenv("SMARTGO_SS_BENCH_PATHS") != ""
	mixed := os.Getenv("SMARTGO_SS_BENCH_MIXED") != ""
	val := bytes.Repeat([]byte{'x'}, benchValue)

	var extra []string
	durability := "async flush (500 ms) vs Redis without persistence"
	redisArgs := []string{"--save", "", "--appendonly", "no"}
	if syncFlush {
		extra = append(extra, "store.flush=sync")
		durability = "sync flush (fsync before the SET reply) vs Redis appendfsync always"
		redisArgs = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
	}
	sa := startStandalone(t, extra...)
	dialStandalone(t, sa, "bench-warmup") // the route is known before the clock starts
	var base *standalone
	if bin := os.Getenv("SMARTGO_SS_BENCH_BASE_BIN"); bin != "" {
		base = startStandaloneBin(t, bin, nil, extra...)
		dialStandalone(t, base, "bench-warmup")
	}
	var remote, local *env
	if paths {
		remote, local = startEnvWith(t, syncFlush, false), startEnvWith(t, syncFlush, true)
	}
	redisPort, redisBench := startRedis(t, redisArgs)
	t.Logf("setup: %d clients, %d-byte values, %d requests per client per load; %s", benchClients, benchValue, benchPerClient, durability)

	res := map[string][]benchResult{}
	for r := 1; r <= rounds; r++ {
		for _, verb := range []string{"SET", "GET"} {
			res["smartgo "+verb] = append(res["smartgo "+verb], loopStateStoreLoad(t, sa.mqtt, verb, benchClients, benchPerClient, val))
		}
		res["smartgo GET goroutines"] = append(res["smartgo GET goroutines"], rawStateStoreLoad(t, sa.mqtt, "GET", benchClients, benchPerClient, val))
		if base != nil {
			for _, verb := range []string{"SET", "GET"} {
				res["base "+verb] = append(res["base "+verb], loopStateStoreLoad(t, base.mqtt, verb, benchClients, benchPerClient, val))
			}
		}
		if mixed {
			servers := map[string]*standalone{"smartgo": sa}
			if base != nil {
				servers["base"] = base
			}
			for name, srv := range servers {
				var wg sync.WaitGroup
				var set, get benchResult
				var setErr, getErr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					set, setErr = loopLoad(srv.mqtt, "SET", benchClients/2, benchPerClient/2, val)
				}()
				go func() {
					defer wg.Done()
					get, getErr = loopLoad(srv.mqtt, "GET", benchClients/2, benchPerClient, val)
				}()
				wg.Wait()
				if setErr != nil || getErr != nil {
					t.Fatalf("%s mixed load: SET %v, GET %v", name, setErr, getErr)
				}
				res[name+" mixed SET"] = append(res[name+" mixed SET"], set)
				res[name+" mixed GET"] = append(res[name+" mixed GET"], get)
			}
		}
		if paths {
			for _, p := range []struct {
				name string
				e    *env
			}{{"remote", remote}, {"local", local}} {
				if r == 1 {
					loopStateStoreLoad(t, p.e.addr, "SET", benchClients, benchPerClient, val)
				}
				res["path "+p.name+" GET"] = append(res["path "+p.name+" GET"], loopStateStoreLoad(t, p.e.addr, "GET", benchClients, benchPerClient, val))
			}
		}
		if redisBench != "" {
			rb := runRedisBenchmark(t, redisBench, redisPort, benchClients, benchValue, benchClients*benchPerClient)
			for _, verb := range []string{"SET", "GET"} {
				res["redis "+verb] = append(res["redis "+verb], rb[verb])
			}
		}
		var line []string
		for _, k := range slices.Sorted(maps.Keys(res)) {
			x := res[k][len(res[k])-1]
			line = append(line, fmt.Sprintf("%s %.0f ops/s p99 %v", k, x.opsPerSec, x.p99.Round(10*time.Microsecond)))
		}
		t.Logf("round %d: %s", r, strings.Join(line, "; "))
	}
	for _, k := range slices.Sorted(maps.Keys(res)) {
		ops, p99 := make([]float64, 0, rounds), make([]float64, 0, rounds)
		for _, x := range res[k] {
			ops, p99 = append(ops, x.opsPerSec), append(p99, float64(x.p99)/1e6)
		}
		t.Logf("%-22s ops/s median %.0f (range %.0f..%.0f); p99 ms median %.2f (range %.2f..%.2f)", k,
			median(ops), slices.Min(ops), slices.Max(ops), median(p99), slices.Min(p99), slices.Max(p99))
	}
	if redisBench == "" {
		return
	}
	for _, verb := range []string{"GET", "SET"} {
		ratios := make([]float64, 0, rounds)
		for i := range res["smartgo "+verb] {
			ratios = append(ratios, res["smartgo "+verb][i].opsPerSec/res["redis "+verb][i].opsPerSec)
		}
		t.Logf("%s smartgo/redis per round %s: median %.2fx", verb, fmtRatios(ratios), median(ratios))
		if base != nil {
			for i := range ratios {
				ratios[i] = res["base "+verb][i].opsPerSec / res["redis "+verb][i].opsPerSec
			}
			t.Logf("%s base/redis per round %s: median %.2fx", verb, fmtRatios(ratios), median(ratios))
		}
	}
}

// benchResult is one load's throughput and tail latency.
type benchResult struct {
	opsPerSec float64
	p50, p99  time.Duration
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRatios(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2fx", x)
	}
	return strings.Join(out, " ")
}

// startRedis starts redis-server with args on a free port; it returns the
// port and the redis-benchmark path, or an empty path (and logs why) when
// Redis is not installed.
func startRedis(t *testing.T, args []string) (string, string) {
	t.Helper()
	srvBin, err1 := exec.LookPath("redis-server")
	benchBin, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		t.Log("redis-server/redis-benchmark not installed (apt-get install redis-server redis-tools); no baseline")
		return "", ""
	}
	port, _ := startRedisServer(t, srvBin, args)
	return port, benchBin
}

// startRedisServer runs redis-server srvBin with args on a free loopback
// port until cleanup and waits until it accepts connections.
func startRedisServer(t testing.TB, srvBin string, args []string) (string, *exec.Cmd) {
	t.Helper()
	port := strconv.Itoa(testnet.FreePorts(t, 1)[0])
	rs := exec.Command(srvBin, append([]string{"--bind", "127.0.0.1", "--port", port, "--dir", t.TempDir()}, args...)...)
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Process.Kill(); _ = rs.Wait() })
	testutil.WaitFor(t, 5*time.Second, "redis-server", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return port, rs
}

// runRedisBenchmark runs redis-benchmark SET,GET and returns each test's
// rps and p99 from its CSV; a missing or zero row fails the test.
func runRedisBenchmark(t *testing.T, bin, port string, clients, value, n int) map[string]benchResult {
	t.Helper()
	out, err := exec.Command(bin, "-h", "127.0.0.1", "-p", port, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(n),
		"-d", strconv.Itoa(value), "-r", "10000", "-t", "set,get", "--csv").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	got := map[string]benchResult{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.ReplaceAll(strings.TrimSpace(line), `"`, ""), ",")
		if len(f) < 7 || (f[0] != "SET" && f[0] != "GET") {
			continue
		}
		rps, err1 := strconv.ParseFloat(f[1], 64)
		p99, err2 := strconv.ParseFloat(f[6], 64)
		if err1 != nil || err2 != nil || rps <= 0 {
			t.Fatalf("redis-benchmark row %q", line)
		}
		got[f[0]] = benchResult{opsPerSec: rps, p99: time.Duration(p99 * float64(time.Millisecond))}
	}
	if len(got) != 2 {
		t.Fatalf("redis-benchmark output without SET and GET rows:\n%s", out)
	}
	return got
}

// rawStateStoreLoad runs clients lean MQTT v5 clients (mqtt/packets on a
// plain socket) doing perClient requests of verb each, one at a time, and
// returns ops/s and p99 (and logs them at -v with percentiles). The
// response's PUBACK goes out with the next request. Every response is
// checked: __stat 200 and, for SET, +OK; for GET, the value, which a SET
// load of the same shape wrote before.
func rawStateStoreLoad(t *testing.T, addr, verb string, clients, perClient int, val []byte) benchResult {
	t.Helper()
	lat := make([][]time.Duration, clients)
	errc := make(chan error, clients)
	conns := make([]net.Conn, clients)
	for i := range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i, nc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := rawStateStoreClient(nc, fmt.Sprintf("raw-%s-%d", verb, i), verb, i, perClient, val)
			lat[i] = l
			errc <- err
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatalf("raw %s: %v", verb, err)
		}
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) != clients*perClient {
		t.Fatalf("raw %s: %d answers, want %d", verb, len(all), clients*perClient)
	}
	p := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))] }
	r := benchResult{opsPerSec: float64(len(all)) / el.Seconds(), p99: p(0.99)}
	if testing.Verbose() {
		t.Logf("%s %s (lean MQTT clients): %d ops, %.0f ops/s, p50 %v, p99 %v", addr, verb, len(all),
			r.opsPerSec, p(0.50).Round(time.Microsecond), r.p99.Round(time.Microsecond))
	}
	return r
}

func rawStateStoreClient(nc net.Conn, id, verb string, idx, n int, val []byte) ([]time.Duration, error) {
	lc := newLeanClient(id, verb, idx, n, val)
	tmp := make([]byte, 16<<10)
	read := func() error {
		_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		k, err := nc.Read(tmp)
		if k == 0 && err != nil {
			return fmt.Errorf("%s request %d: %w", id, lc.j, err)
		}
		return lc.feed(tmp[:k])
	}
	if _, err := nc.Write(lc.connectPacket()); err != nil {
		return nil, err
	}
	for !lc.connected {
		if err := read(); err != nil {
			return nil, err
		}
	}
	for lc.j < n {
		if _, err := nc.Write(lc.nextRequest()); err != nil {
			return lc.lat, err
		}
		for !lc.idle() {
			if err := read(); err != nil {
				return lc.lat, err
			}
		}
	}
	return lc.lat, nil
}

// leanClient is the protocol side of one lean MQTT v5 state store client
// (one request in flight), shared by the goroutine-per-client and the
// event-loop load generators: it builds CONNECT and the requests, parses
// what the server sends and checks every response.
type leanClient struct {
	id, verb, resp string
	idx, n         int
	val, want      []byte
	dec            *packets.Decoder
	in             []byte // bytes received, not yet parsed
	out            []byte
	owed           []byte // the PUBACK of the last response, sent with the next request
	corr           []byte
	lat            []time.Duration

	connected       bool
	j               int    // requests sent
	pid             uint16 // packet id of the request in flight
	t0              time.Time
	acked, answered bool
}

func newLeanClient(id, verb string, idx, n int, val []byte) *leanClient {
	dec, _ := packets.NewDecoder(packets.Options{MaxPacketSize: 1 << 20})
	lc := &leanClient{id: id, verb: verb, idx: idx, n: n, val: val, dec: dec, corr: make([]byte, 16),
		resp: "clients/" + id + "/services/statestore/_any_/command/invoke/response",
		lat:  make([]time.Duration, 0, n), acked: true, answered: true}
	lc.want = []byte("+OK\r\n")
	if verb == "GET" {
		lc.want = statestore.AppendRequest(nil, val)[len("*1\r\n"):] // $<len>\r\n<val>\r\n
	}
	return lc
}

func (lc *leanClient) connectPacket() []byte {
	out, _ := packets.AppendPacket(nil, &packets.Connect{ClientID: lc.id, CleanStart: true, KeepAlive: 60}, packets.Version5)
	return out
}

// idle reports whether the request in flight got both its PUBACK and its
// response.
func (lc *leanClient) idle() bool { return lc.acked && lc.answered }

// done reports whether every request was answered.
func (lc *leanClient) done() bool { return lc.connected && lc.j == lc.n && lc.idle() }

// nextRequest returns the bytes of the next request (after the PUBACK
// owed) and starts its clock.
func (lc *leanClient) nextRequest() []byte {
	j := lc.j
	key := []byte("key:" + strconv.Itoa((lc.idx*lc.n+j)%10000))
	args := [][]byte{[]byte(lc.verb), key}
	if lc.verb == "SET" {
		args = append(args, lc.val)
	}
	req := &packets.Publish{QoS: 1, PacketID: uint16(j%65535 + 1), Topic: statestore.RequestTopic,
		Payload: statestore.AppendRequest(nil, args...)}
	pr := &req.Properties
	pr.Present.Add(packets.PropResponseTopic)
	pr.Present.Add(packets.PropCorrelationData)
	pr.Present.Add(packets.PropMessageExpiry)
	pr.ResponseTopic, pr.MessageExpiry = lc.resp, 10
	binary.BigEndian.PutUint64(lc.corr, uint64(j))
	pr.CorrelationData = lc.corr
	pr.User = []packets.UserProperty{{Key: statestore.PropTimestamp, Value: statestore.HLC{Wall: time.Now().UnixMilli(), Node: lc.id}.String()}}
	lc.out = append(lc.out[:0], lc.owed...)
	lc.owed = lc.owed[:0]
	lc.out, _ = packets.AppendPacket(lc.out, req, packets.Version5)
	lc.pid, lc.acked, lc.answered = req.PacketID, false, false
	lc.j++
	lc.t0 = time.Now()
	return lc.out
}

// feed parses received bytes: CONNACK, the request's PUBACK, its response
// (checked: __stat 200 and the expected payload).
func (lc *leanClient) feed(b []byte) error {
	lc.in = append(lc.in, b...)
	for len(lc.in) > 0 {
		p, k, err := lc.dec.Next(packets.Version5, lc.in)
		if errors.Is(err, packets.ErrIncomplete) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: decode: %w", lc.id, err)
		}
		lc.in = lc.in[k:]
		switch p := p.(type) {
		case *packets.Connack:
			if p.ReasonCode != 0 {
				return fmt.Errorf("%s: CONNACK %v", lc.id, p.ReasonCode)
			}
			lc.connected = true
		case *packets.Puback:
			lc.acked = lc.acked || p.PacketID == lc.pid
		case *packets.Publish:
			if p.Topic == lc.resp && bytes.Equal(p.Properties.CorrelationData, lc.corr) {
				stat := ""
				for _, up := range p.Properties.User {
					if up.Key == statestore.PropStatus {
						stat = up.Value
					}
				}
				if stat != statestore.Status200 || !bytes.Equal(p.Payload, lc.want) {
					return fmt.Errorf("%s request %d: __stat %q payload %q", lc.id, lc.j-1, stat, p.Payload)
				}
				lc.answered = true
				lc.lat = append(lc.lat, time.Since(lc.t0))
			}
			lc.owed, _ = packets.AppendPacket(lc.owed, &packets.Puback{PacketID: p.PacketID}, packets.Version5)
		default:
			return fmt.Errorf("%s: unexpected %T", lc.id, p)
		}
	}
	return nil
}
