package statestore

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	sscli "github.com/smartgo/smartgo/client/statestore"
)

// TestStateStoreBenchVsRedis measures SET and GET through the MQTT front
// with benchClients concurrent clients and benchValue-byte values, then
// runs redis-benchmark against a local redis-server with the same client
// count and value size, in the same run. Opt in with SMARTGO_SS_BENCH=1
// (SMARTGO_SS_BENCH_SYNC=1 uses sync flush on the broker).
func TestStateStoreBenchVsRedis(t *testing.T) {
	if os.Getenv("SMARTGO_SS_BENCH") == "" {
		t.Skip("set SMARTGO_SS_BENCH=1 to run the benchmark")
	}
	const benchClients, benchValue, perClient = 50, 100, 400
	e := startEnv(t, os.Getenv("SMARTGO_SS_BENCH_SYNC") != "")
	cs := make([]*sscli.Client, benchClients)
	for i := range cs {
		cs[i] = e.dial(t, fmt.Sprintf("bench-%d", i))
	}
	val := bytes.Repeat([]byte{'x'}, benchValue)
	run := func(name string, op func(c *sscli.Client, key []byte) error) {
		lat := make([][]time.Duration, benchClients)
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := ctx10(t)
				_ = ctx
				for j := 0; j < perClient; j++ {
					key := []byte("key:" + strconv.Itoa((i*perClient+j)%10000))
					t0 := time.Now()
					if err := op(c, key); err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					lat[i] = append(lat[i], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		slices.Sort(all)
		if len(all) == 0 {
			return
		}
		p := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))] }
		t.Logf("smartgo %s: %d ops, %.0f ops/s, p50 %v, p99 %v", name, len(all),
			float64(len(all))/el.Seconds(), p(0.50).Round(time.Microsecond), p(0.99).Round(time.Microsecond))
	}
	run("SET", func(c *sscli.Client, key []byte) error {
		_, _, err := c.Set(ctx10(t), key, val, sscli.SetOptions{})
		return err
	})
	run("GET", func(c *sscli.Client, key []byte) error {
		_, _, _, err := c.Get(ctx10(t), key)
		return err
	})

	srvBin, err1 := exec.LookPath("redis-server")
	benchBin, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		t.Log("redis-server/redis-benchmark not installed; no baseline")
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	rs := exec.Command(srvBin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Process.Kill(); _ = rs.Wait() }()
	waitFor(t, "redis-server", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	out, err := exec.Command(benchBin, "-h", "127.0.0.1", "-p", port, "-c", strconv.Itoa(benchClients),
		"-n", strconv.Itoa(benchClients*perClient*5), "-d", strconv.Itoa(benchValue), "-t", "set,get", "--csv").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	t.Logf("redis-benchmark (-c %d -d %d), csv:\n%s", benchClients, benchValue, out)
}
