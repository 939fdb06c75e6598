package statestore

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	aiomqtt "github.com/Azure/iot-operations-sdks/go/mqtt"
	"github.com/Azure/iot-operations-sdks/go/mqtt/retry"
	"github.com/Azure/iot-operations-sdks/go/protocol"
	"github.com/Azure/iot-operations-sdks/go/services/statestore"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
)

// The load of BenchmarkStateStoreAzureCPU: azureClients Azure IoT
// Operations clients doing azureOps SETs of azureValue-byte values in
// total, then azureOps GETs of the same keys, one request in flight per
// client; Redis gets the same client count, request count and value size
// from redis-benchmark.
//
// Both servers work on a key space of azureOps keys: SmartGo's loads all
// SET and GET the same azureOps keys (the first load inserts them, the
// later ones overwrite them), and redis-benchmark draws its keys at random
// from azureOps (-r). Until the eleventh session SmartGo's keys were new
// in every load (its table grew by azureOps keys a load, every SET an
// insert) while Redis's were drawn from 10,000: not the same work.
const azureClients, azureOps, azureValue = 50, 20000, 100

// BenchmarkStateStoreAzureCPU measures the server CPU time (the server
// process's threads' run time in ns, testutil.ProcessCPU; until the
// seventeenth session utime + stime in 10 ms ticks, ±10 % of Redis's
// phase) per state store operation
// of a real `smartgo standalone` process driven by the Azure IoT
// Operations Go client (services v0.4.1), next to redis-server driven by
// redis-benchmark in the same run (Redis without persistence, SmartGo
// with its default async flush). Reported metrics: server-µs/op for
// SmartGo's SET and GET phases and for Redis's, and smartgo/redis, the
// ratio of the totals (the target is ≤ 2). With
// SMARTGO_SS_BENCH_BASE_BIN=<smartgo binary> another build (e.g. main
// before a change) runs the same load in the same run and base/redis is
// reported too; the servers take turns to go first. Without
// redis-server and redis-benchmark the Redis metrics are skipped. Each
// iteration is the whole load: run with -benchtime Nx (N ≥ 2 with a base,
// the first load of a run costs more).
// SMARTGO_SS_BENCH_PERF=<dir> counts each server's system calls by kind
// per phase with perf stat (perfPhase).
func BenchmarkStateStoreAzureCPU(b *testing.B) {
	type server struct {
		name string
		sa   *standalone
	}
	// SMARTGO_SS_BENCH_PPROF=<file>: the smartgo server's CPU profile over
	// its loads goes to file (make pgo merges it into the build's
	// profile-guided optimisation profile).
	profFile := os.Getenv("SMARTGO_SS_BENCH_PPROF")
	var extra []string
	if profFile != "" {
		extra = []string{"metrics.listen=127.0.0.1:" + strconv.Itoa(testnet.FreePorts(b, 1)[0]), "metrics.pprof=true"}
	}
	servers := []server{{"smartgo", startStandalone(b, extra...)}}
	if profFile != "" {
		stop := profileCPU(b, strings.TrimPrefix(extra[0], "metrics.listen="), profFile)
		defer stop()
	}
	if bin := os.Getenv("SMARTGO_SS_BENCH_BASE_BIN"); bin != "" {
		servers = append(servers, server{"base", startStandaloneBin(b, bin, nil)})
	}
	redisPort, redisBench, redisPID := startRedisPID(b)
	val := strings.Repeat("x", azureValue)
	cpu := map[string][2]float64{} // name -> SET, GET µs of CPU per op, summed over iterations
	for i := 0; i < b.N; i++ {
		for k := range servers {
			// Rotated each iteration: the first load of a run meets a
			// colder client process, which batches less.
			s := servers[(i+k)%len(servers)]
			perf := func(verb string, pid int) func() {
				return perfPhase(b, fmt.Sprintf("%s-%d-%s", s.name, i, verb), pid)
			}
			set, get, err := azureCPULoad(s.sa, val, i, perf)
			if err != nil {
				b.Fatalf("%s (%s): %v", s.name, s.sa.bin, err)
			}
			c := cpu[s.name]
			cpu[s.name] = [2]float64{c[0] + set, c[1] + get}
		}
		if redisBench != "" {
			var r [2]float64
			for j, verb := range []string{"set", "get"} {
				stopPerf := perfPhase(b, fmt.Sprintf("redis-%d-%s", i, strings.ToUpper(verb)), redisPID)
				before, err := testutil.ProcessCPU(redisPID)
				if err != nil {
					b.Fatal(err)
				}
				out, err := exec.Command(redisBench, "-h", "127.0.0.1", "-p", redisPort, "-c", strconv.Itoa(azureClients),
					"-n", strconv.Itoa(azureOps), "-d", strconv.Itoa(azureValue), "-r", strconv.Itoa(azureOps), "-t", verb, "-q").CombinedOutput()
				if err != nil {
					b.Fatalf("redis-benchmark: %v\n%s", err, out)
				}
				after, err := testutil.ProcessCPU(redisPID)
				if err != nil {
					b.Fatal(err)
				}
				stopPerf()
				r[j] = float64(after.Since(before).Nanoseconds()) / 1e3 / azureOps
			}
			c := cpu["redis"]
			cpu["redis"] = [2]float64{c[0] + r[0], c[1] + r[1]}
		}
	}
	n := float64(b.N)
	total := func(name string) float64 { return (cpu[name][0] + cpu[name][1]) / 2 / n }
	for _, name := range []string{"smartgo", "base", "redis"} {
		if _, ok := cpu[name]; !ok {
			continue
		}
		b.ReportMetric(cpu[name][0]/n, name+"-SET-server-µs/op")
		b.ReportMetric(cpu[name][1]/n, name+"-GET-server-µs/op")
		b.ReportMetric(total(name), name+"-server-µs/op")
	}
	if _, ok := cpu["redis"]; ok {
		b.ReportMetric(total("smartgo")/total("redis"), "smartgo/redis")
		if _, ok := cpu["base"]; ok {
			b.ReportMetric(total("base")/total("redis"), "base/redis")
		}
	}
	b.ReportMetric(0, "ns/op") // the wall time of a whole load says nothing here
}

// profileCPU takes a CPU profile of the process serving /debug/pprof/ on
// addr, over SMARTGO_SS_BENCH_PPROF_SECONDS (default 60) seconds from
// now: net/http/pprof writes a profile only at the end of the span it was
// asked for. stop waits for it and writes it to file.
func profileCPU(b *testing.B, addr, file string) (stop func()) {
	b.Helper()
	secs := os.Getenv("SMARTGO_SS_BENCH_PPROF_SECONDS")
	if secs == "" {
		secs = "60"
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + secs)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("profile: %s: %s", resp.Status, data)
		}
		done <- result{data, err}
	}()
	return func() {
		r := <-done
		if r.err == nil {
			r.err = os.WriteFile(file, r.data, 0o644)
		}
		if r.err != nil {
			b.Errorf("cpu profile of the smartgo server: %v", r.err)
		}
	}
}

// azureCPUWait bounds each step of a load that waits on the server:
// the clients' connections (and their subscriptions), and each phase.
// A server that refuses the clients, or a process that is not a SmartGo
// standalone at all, fails the benchmark with the reason within it
// instead of hanging it.
const azureCPUWait = 2 * time.Minute

// azureConnectAttempts is how often each client tries to connect before
// the load gives up with the last connect error (the Azure session
// client otherwise retries for ever, and its Start and first request
// wait for a connection with no bound of their own).
const azureConnectAttempts = 5

// azureCPULoad connects azureClients Azure clients to sa, runs the SET
// phase then the GET phase (every GET checks the value the SET wrote) and
// returns the server's CPU µs per operation in each phase. Connecting and
// one warm-up request per client are not counted. Every wait is bounded
// (azureCPUWait); an error names what failed. perf (SMARTGO_SS_BENCH_PERF,
// perfPhase) is started on the server's pid for each phase, named by its
// verb, and stopped when the phase ends.
func azureCPULoad(sa *standalone, val string, iter int, perf func(verb string, pid int) (stop func())) (setUs, getUs float64, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients, stop, err := azureCPUClients(ctx, sa.mqtt, fmt.Sprintf("azure-cpu-%d", iter))
	defer stop()
	if err != nil {
		return 0, 0, err
	}
	pid := sa.cmd.Process.Pid
	run := func(verb string) (float64, error) {
		ctx, cancel := context.WithTimeout(ctx, azureCPUWait)
		defer cancel()
		stopPerf := perf(verb, pid)
		defer stopPerf()
		before, err := testutil.ProcessCPU(pid)
		if err != nil {
			return 0, err
		}
		var wg sync.WaitGroup
		errc := make(chan error, len(clients))
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < azureOps/azureClients; j++ {
					key := fmt.Sprintf("k-%d-%d", i, j) // the same keys every load
					if verb == "SET" {
						if r, err := c.Set(ctx, key, val); err != nil || !r.Value {
							errc <- fmt.Errorf("SET %s: %v %v", key, r, err)
							return
						}
					} else if r, err := c.Get(ctx, key); err != nil || r.Value != val {
						errc <- fmt.Errorf("GET %s: %v", key, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			return 0, fmt.Errorf("%s phase: %w", verb, err)
		}
		after, err := testutil.ProcessCPU(pid)
		return float64(after.Since(before).Nanoseconds()) / 1e3 / azureOps, err
	}
	if setUs, err = run("SET"); err != nil {
		return 0, 0, err
	}
	getUs, err = run("GET")
	return setUs, getUs, err
}

// azureCPUClients connects azureClients Azure state store clients (ids
// prefix-<i>) to the MQTT server at addr and has each answer one GET.
// stop (never nil) closes those it made. Within azureCPUWait it either
// has them all or returns why not: a connection refused (the last
// connect error once azureConnectAttempts attempts failed), a CONNACK
// refusal (the session client's fatal error), or no answer.
func azureCPUClients(ctx context.Context, addr, prefix string) (_ []*statestore.Client[string, string], stop func(), _ error) {
	ctx, cancel := context.WithTimeout(ctx, azureCPUWait)
	defer cancel()
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, stop, fmt.Errorf("mqtt address %q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, stop, fmt.Errorf("mqtt address %q: %w", addr, err)
	}
	clients := make([]*statestore.Client[string, string], azureClients)
	for i := range clients {
		id := fmt.Sprintf("%s-%d", prefix, i)
		attempts := &azureLastError{inner: &retry.ExponentialBackoff{MaxAttempts: azureConnectAttempts,
			MinInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond}}
		mc, err := aiomqtt.NewSessionClient(id, aiomqtt.TCPConnection(host, uint16(p)), aiomqtt.WithConnectionRetry(attempts))
		if err != nil {
			return nil, stop, fmt.Errorf("%s: %w", id, err)
		}
		connected, fatal := make(chan struct{}), make(chan error, 1)
		var once sync.Once
		unregister := mc.RegisterConnectEventHandler(func(*aiomqtt.ConnectEvent) { once.Do(func() { close(connected) }) })
		mc.RegisterFatalErrorHandler(func(err error) {
			select {
			case fatal <- err:
			default:
			}
		})
		if err := mc.Start(); err != nil {
			return nil, stop, fmt.Errorf("%s: start: %w", id, err)
		}
		stops = append(stops, func() { _ = mc.Stop() })
		select {
		case <-connected:
			unregister()
		case err := <-fatal:
			return nil, stop, fmt.Errorf("%s: no connection to %s: %w (last connect error: %v)", id, addr, err, attempts.last())
		case <-ctx.Done():
			return nil, stop, fmt.Errorf("%s: no connection to %s within %v (last connect error: %v)", id, addr, azureCPUWait, attempts.last())
		}
		app, err := protocol.NewApplication()
		if err != nil {
			return nil, stop, err
		}
		c, err := statestore.New[string, string](app, mc)
		if err != nil {
			return nil, stop, fmt.Errorf("%s: %w", id, err)
		}
		if err := c.Start(ctx); err != nil {
			return nil, stop, fmt.Errorf("%s: start the state store client: %w", id, err)
		}
		stops = append(stops, c.Close)
		if _, err := c.Get(ctx, "warmup"); err != nil {
			return nil, stop, fmt.Errorf("%s: warm-up GET: %w", id, err)
		}
		clients[i] = c
	}
	return clients, stop, nil
}

// azureLastError is a connection retry policy (inner) that keeps the
// last error of its attempts: the session client reports only that it
// gave up.
type azureLastError struct {
	inner retry.Policy
	mu    sync.Mutex
	err   error
}

func (a *azureLastError) Start(ctx context.Context, name string, task retry.Task) error {
	return a.inner.Start(ctx, name, func(ctx context.Context) (bool, error) {
		again, err := task(ctx)
		if err != nil {
			a.mu.Lock()
			a.err = err
			a.mu.Unlock()
		}
		return again, err
	})
}

func (a *azureLastError) last() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// startRedisPID is startRedis (no persistence) that also returns the
// server's pid; an empty bench path means Redis is not installed.
func startRedisPID(b *testing.B) (port, bench string, pid int) {
	b.Helper()
	srvBin, err1 := exec.LookPath("redis-server")
	benchBin, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		b.Log("redis-server/redis-benchmark not installed (apt-get install redis-server redis-tools); no baseline")
		return "", "", 0
	}
	port, rs := startRedisServer(b, srvBin, []string{"--save", "", "--appendonly", "no"})
	return port, benchBin, rs.Process.Pid
}

// TestAzureCPUBenchmarkRefused: BenchmarkStateStoreAzureCPU run on a
// "smartgo" that says it runs but accepts no MQTT connection (a wrong
// binary: every connect is refused) fails within its bound, and the
// client setup names the refusal, instead of waiting for ever for the
// Azure clients to connect.
func TestAzureCPUBenchmarkRefused(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "not-smartgo")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'standalone running'\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SMARTGO_SS_BIN", fake)
	t.Setenv("SMARTGO_SS_BENCH_BASE_BIN", "")
	done := make(chan testing.BenchmarkResult, 1)
	go func() { done <- testing.Benchmark(BenchmarkStateStoreAzureCPU) }()
	select {
	case r := <-done:
		if r.N != 0 {
			t.Fatalf("the benchmark passed against a server refusing every client: %v", r)
		}
	case <-time.After(azureCPUWait + time.Minute):
		t.Fatal("the benchmark still waits on a server refusing every client")
	}

	refused := fmt.Sprintf("127.0.0.1:%d", testnet.FreePorts(t, 1)[0])
	_, stop, err := azureCPUClients(context.Background(), refused, "refused")
	stop()
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("clients of %s: %v, want an error naming the refused connection", refused, err)
	}
}
