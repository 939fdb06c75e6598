package statestore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	aiomqtt "github.com/Azure/iot-operations-sdks/go/mqtt"
	"github.com/Azure/iot-operations-sdks/go/protocol"
	"github.com/Azure/iot-operations-sdks/go/services/statestore"
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

// BenchmarkStateStoreAzureCPU measures the server CPU time (utime + stime
// of the server process, from /proc/<pid>/stat) per state store operation
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
func BenchmarkStateStoreAzureCPU(b *testing.B) {
	type server struct {
		name string
		sa   *standalone
	}
	servers := []server{{"smartgo", startStandalone(b)}}
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
			set, get := azureCPULoad(b, s.sa, val, i)
			c := cpu[s.name]
			cpu[s.name] = [2]float64{c[0] + set, c[1] + get}
		}
		if redisBench != "" {
			var r [2]float64
			for j, verb := range []string{"set", "get"} {
				before := procCPU(b, redisPID)
				out, err := exec.Command(redisBench, "-h", "127.0.0.1", "-p", redisPort, "-c", strconv.Itoa(azureClients),
					"-n", strconv.Itoa(azureOps), "-d", strconv.Itoa(azureValue), "-r", strconv.Itoa(azureOps), "-t", verb, "-q").CombinedOutput()
				if err != nil {
					b.Fatalf("redis-benchmark: %v\n%s", err, out)
				}
				r[j] = (procCPU(b, redisPID) - before) / azureOps
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

// azureCPULoad connects azureClients Azure clients to sa, runs the SET
// phase then the GET phase (every GET checks the value the SET wrote) and
// returns the server's CPU µs per operation in each phase. Connecting and
// one warm-up request per client are not counted.
func azureCPULoad(b *testing.B, sa *standalone, val string, iter int) (setUs, getUs float64) {
	b.Helper()
	host, port, _ := net.SplitHostPort(sa.mqtt)
	p, _ := strconv.Atoi(port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*statestore.Client[string, string], azureClients)
	for i := range clients {
		id := fmt.Sprintf("azure-cpu-%d-%d", iter, i)
		mc, err := aiomqtt.NewSessionClient(id, aiomqtt.TCPConnection(host, uint16(p)))
		if err != nil {
			b.Fatal(err)
		}
		if err := mc.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = mc.Stop() }()
		app, err := protocol.NewApplication()
		if err != nil {
			b.Fatal(err)
		}
		c, err := statestore.New[string, string](app, mc)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Get(ctx, "warmup"); err != nil {
			b.Fatalf("warm-up GET: %v", err)
		}
		clients[i] = c
	}
	pid := sa.cmd.Process.Pid
	run := func(verb string) float64 {
		before := procCPU(b, pid)
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
		for err := range errc {
			b.Fatal(err)
		}
		return (procCPU(b, pid) - before) / azureOps
	}
	return run("SET"), run("GET")
}

// procCPU returns the CPU time (utime + stime) the process pid has used,
// in µs, from /proc/<pid>/stat (clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name: state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		b.Fatalf("short /proc/%d/stat: %q", pid, data)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return (ut + st) * 1e6 / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

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
