//go:build cluster

// What watching a broker costs it: a real broker process under load
// (100k msgs/s), with and without Prometheus scraping its /metrics every
// 5 s and a console process (with a browser's polling of the cluster,
// topics and chart pages) asking it for its state. Run with
// `make console-overhead`.

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
)

// procCPU returns a process's user+system CPU time (from /proc).
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name (which may hold spaces), from ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// observer is what "watching" means: a scraper every 5 s and a console
// process with a browser polling it the way its pages do.
type observer struct {
	base string // the console's URL
	pid  int    // the console process
	stop func()
}

func startObserver(tb testing.TB, dir, reg, metrics string) *observer {
	ports := freePorts(tb, 1)
	consoleAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	con := start(tb, dir, "console-"+consoleAddr, "console", "-listen", consoleAddr, "-registries", reg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	get := func(url string) {
		if resp, err := http.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	every := func(d time.Duration, urls ...string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				for _, u := range urls {
					get(u)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	base := "http://" + consoleAddr
	every(5*time.Second, "http://"+metrics+"/metrics")
	every(5*time.Second, base+"/api/series?names=total:put,total:get,mqtt:connections", base+"/api/series?prefix=topic:&top=8")
	every(10*time.Second, base+"/api/cluster", base+"/api/topics", base+"/api/groups")
	return &observer{base: base, pid: con.cmd.Process.Pid, stop: func() {
		cancel()
		wg.Wait()
		con.stop()
	}}
}

// BenchmarkClusterConsoleOverhead loads a broker at 100k msgs/s (batches
// of 50 messages of 128 bytes from 16 paced senders on 4 producers, one
// push consumer group reading them) and alternates phases without and with an observer (the
// scraper and the console), six of each, measuring the broker process's
// CPU per phase. It reports the median CPU (cores) of each kind and their
// difference in percent (on a shared machine this is within the noise),
// and the precise figure: the broker CPU one observation cycle costs
// (measured over 200 cycles back to back), as a share of the broker's CPU
// at 100k msgs/s when it comes every 5 s.
func BenchmarkClusterConsoleOverhead(b *testing.B) {
	phase := 15 * time.Second
	if s := os.Getenv("SMARTGO_OVERHEAD_PHASE"); s != "" {
		phase, _ = time.ParseDuration(s)
	}
	const rate, batch, producers, senders, rounds = 100_000, 50, 4, 16, 6
	dir := b.TempDir()
	ports := freePorts(b, 3)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	metrics := "127.0.0.1:" + strconv.Itoa(ports[2])
	start(b, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	brk := start(b, dir, "broker", "broker", "-listen", "127.0.0.1:"+strconv.Itoa(ports[1]), "-data", filepath.Join(dir, "b"),
		"-registries", reg, "-set", "broker.advertise_ip=127.0.0.1", "-set", "metrics.listen="+metrics,
		"-set", "store.segment_size=512MiB", "-set", "store.file_reserved_time=1h")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	copts := client.ClientOptions{Registries: []string{reg}}
	var sent atomic.Int64
	var wg sync.WaitGroup
	var ps []*client.Producer
	for i := range producers {
		p, err := client.NewProducer(client.ProducerOptions{ClientOptions: copts, Group: "overhead-" + strconv.Itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	body := make([]byte, 128)
	// Wait for the route, then pace each producer at rate/producers.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := ps[0].Send(ctx, &client.Message{Topic: "Overhead", Body: body})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no route: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := range senders {
		p := ps[i%producers]
		wg.Add(1)
		go func(p *client.Producer) {
			defer wg.Done()
			msgs := make([]*client.Message, batch)
			for i := range msgs {
				msgs[i] = &client.Message{Topic: "Overhead", Body: body}
			}
			every := time.Second * batch * senders / rate
			next := time.Now()
			for ctx.Err() == nil {
				if _, err := p.SendBatch(ctx, msgs); err == nil {
					sent.Add(batch)
				}
				next = next.Add(every)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				} else if d < -time.Second {
					next = time.Now() // fell behind: do not burst
				}
			}
		}(p)
	}
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: copts, Group: "overhead-g", From: client.ConsumeFromLast},
		func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	if err != nil {
		b.Fatal(err)
	}
	if err := pc.Subscribe("Overhead", "*"); err != nil {
		b.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	time.Sleep(5 * time.Second) // warm up

	pid := brk.cmd.Process.Pid
	measure := func(on bool, phase time.Duration) (cores, msgsPerSec float64) {
		var obs *observer
		if on {
			obs = startObserver(b, dir, reg, metrics)
			time.Sleep(2 * time.Second) // the console's start-up is not the broker's cost
		}
		c0, n0, t0 := procCPU(b, pid), sent.Load(), time.Now()
		time.Sleep(phase)
		c1, n1, t1 := procCPU(b, pid), sent.Load(), time.Now()
		if obs != nil {
			obs.stop()
		}
		dt := t1.Sub(t0).Seconds()
		return (c1 - c0).Seconds() / dt, float64(n1-n0) / dt
	}
	b.ResetTimer()
	var off, on, offRate, onRate []float64
	for r := range rounds {
		for _, o := range []bool{r%2 == 1, r%2 == 0} { // alternate which goes first
			c, m := measure(o, phase)
			b.Logf("round %d observer=%v: broker %.3f cores at %.0f msgs/s", r, o, c, m)
			if o {
				on, onRate = append(on, c), append(onRate, m)
			} else {
				off, offRate = append(off, c), append(offRate, m)
			}
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	pc.Close()
	for _, p := range ps {
		p.Close()
	}
	// The observer's absolute cost, measured precisely: with the load
	// stopped, drive the broker-facing work of many observation cycles
	// back to back (a scrape, and the console's cluster, topics and
	// groups pages, which also cost more than its 5 s sampler round) and
	// count the broker's CPU per cycle. A real observer does at most one
	// such cycle every 5 s.
	obs := startObserver(b, dir, reg, metrics)
	time.Sleep(2 * time.Second)
	consoleBase := obs.base
	const cycles = 200
	c0, k0 := procCPU(b, pid), procCPU(b, obs.pid)
	for range cycles {
		for _, u := range []string{"http://" + metrics + "/metrics", consoleBase + "/api/cluster", consoleBase + "/api/topics", consoleBase + "/api/groups"} {
			if resp, err := http.Get(u); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	perCycle := (procCPU(b, pid) - c0) / cycles
	consolePerCycle := (procCPU(b, obs.pid) - k0) / cycles
	obs.stop()

	med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
	mOff, mOn := med(off), med(on)
	b.ReportMetric(med(offRate), "msgs/s")
	b.ReportMetric(mOff, "cores-unobserved")
	b.ReportMetric(mOn, "cores-observed")
	b.ReportMetric((mOn/mOff-1)*100, "overhead-%")
	// The load does not always reach its rate on a shared machine, and
	// the phases' rates differ: compare CPU per message too, round by
	// round (each round has one phase of each kind).
	var paired []float64
	for i := range off {
		paired = append(paired, (on[i]/onRate[i])/(off[i]/offRate[i]))
	}
	b.ReportMetric(med(off)/med(offRate)*1e6, "broker-us/msg-unobserved")
	b.ReportMetric(med(on)/med(onRate)*1e6, "broker-us/msg-observed")
	b.ReportMetric((med(paired)-1)*100, "overhead-per-msg-%")
	// The broker's CPU at the target rate, from the unobserved phases.
	perMsg := mOff / med(offRate)
	atRate := perMsg * rate
	b.ReportMetric(float64(perCycle.Microseconds())/1000, "observer-cpu-ms/cycle")
	b.ReportMetric(atRate, "cores-at-100k")
	b.ReportMetric(perCycle.Seconds()/5/atRate*100, "observer-%-at-100k")
	// Inside `smartgo standalone` the console shares the broker's process:
	// its own work (the API, JSON, the pages) counts there too.
	b.ReportMetric(float64(consolePerCycle.Microseconds())/1000, "console-cpu-ms/cycle")
	b.ReportMetric((perCycle+consolePerCycle).Seconds()/5/atRate*100, "standalone-%-at-100k")
	if med(offRate) < 0.9*rate || med(onRate) < 0.9*rate {
		b.Logf("warning: the load did not reach %d msgs/s (%.0f without, %.0f with the observer)", rate, med(offRate), med(onRate))
	}
}
