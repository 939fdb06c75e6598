// Command compare measures SmartGo against NATS JetStream in one process
// and one run, on the same machine, message size and publisher count.
//
// Both servers run in-process on loopback with their data in a temp
// directory:
//
//   - JetStream: an embedded nats-server with file storage. With -durable
//     (the default) the server runs with sync_always, so every stored
//     message is fsynced before its publish ack.
//   - SmartGo: registry.New + broker.New with a FlushSync store (group
//     commit: a send is answered after the fdatasync that covers it).
//     Without -durable both use their defaults: JetStream fsyncs every 2
//     minutes, SmartGo every 500 ms.
//
// Each run is end to end: P publishers, each keeping W asynchronous
// publishes in flight, and one push consumer. The rate is acknowledged
// publishes per second, timed the same way for both: from the first
// publish to the last acknowledgement, with the consumer running (server
// start, stream/topic creation, connections and the consumer's catch-up
// after the last ack are outside the window). Latency is taken from a
// time stamp in each body to its delivery to the consumer; "lost" counts
// acknowledged messages the consumer did not receive before the run
// ended (their latency is in no percentile). -warmup N
// sends and consumes N messages on both before the clock starts (each run
// starts fresh servers, so their first half second, with cold queue
// files, connections and heap, otherwise weighs on the p99); -repeat
// interleaves runs and reports medians. -rate R paces both to R publishes
// per second in all (each publish due at start + i/R): at a rate both
// sustain, latencies compare at equal load instead of at each system's own
// saturation, where the faster system also queues more. The table prints
// SmartGo/JetStream ratios (rate: higher is better; latency: lower is
// better). -factor F reads the target literally: JetStream runs as
// fast as it goes, and SmartGo, run right after it, is paced at F times the
// rate that JetStream run reached; its p99 must still be at most
// JetStream's. -cpuprofile, -memprofile and -trace cover the whole process.
//
//	go run . -sizes 128,1024 -publishers 4 -count 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/benchmark"
	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/registry"
	"github.com/smartgo/smartgo/store"
)

// sgWrites is SmartGo's store.Options.AsyncWrites (-async-writes).
var sgWrites store.AsyncWriteMode

type result struct {
	rate     float64 // acknowledged publishes per second
	p50, p99 time.Duration
	errors   int64
	lost     int64 // acknowledged, never delivered to the consumer (its latency is in no percentile)
}

func main() {
	sizes := flag.String("sizes", "128,1024", "comma-separated body sizes in bytes")
	publishers := flag.Int("publishers", 4, "concurrent publishers")
	window := flag.Int("window", 64, "async publishes in flight per publisher")
	count := flag.Int64("count", 100000, "messages per run")
	durable := flag.Bool("durable", true, "fsync before every ack (JetStream sync_always, SmartGo FlushSync)")
	only := flag.String("only", "", "run only one system: smartgo or jetstream")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole process to `file`")
	traceFile := flag.String("trace", "", "write a runtime execution trace of the whole process to `file`")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole process to `file` at the end")
	warmup := flag.Int64("warmup", 0, "messages sent and consumed before each measured run, not counted (both systems)")
	rate := flag.Float64("rate", 0, "publishes per second in all, paced the same way on both (0 = as fast as each goes); at a rate both sustain, the latencies compare at equal load")
	asyncWrites := flag.String("async-writes", "hybrid", "SmartGo's store.async_writes without -durable: hybrid, mapped or pwrite")
	factor := flag.Float64("factor", 0, "pace SmartGo at this multiple of the rate of the JetStream run just before it (JetStream unpaced; excludes -rate and -only)")
	repeat := flag.Int("repeat", 1, "runs per system and size, interleaved (the order alternates); the table shows medians and the rate's range")
	flag.Parse()
	switch *asyncWrites {
	case "hybrid":
	case "mapped":
		sgWrites = store.AsyncWriteMapped
	case "pwrite":
		sgWrites = store.AsyncWritePwrite
	default:
		fatal(fmt.Errorf("bad -async-writes %q", *asyncWrites))
	}
	if *repeat < 1 {
		fatal(fmt.Errorf("bad -repeat %d", *repeat))
	}
	if *factor < 0 || (*factor > 0 && (*rate > 0 || *only != "")) {
		fatal(fmt.Errorf("-factor %g: must be positive and excludes -rate and -only", *factor))
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			fatal(err)
		}
		if err := trace.Start(f); err != nil {
			fatal(err)
		}
		defer trace.Stop()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			f, err := os.Create(*memprofile)
			if err != nil {
				fatal(err)
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fatal(err)
			}
		}()
	}
	var rows [][]string
	rows = append(rows, []string{"size", "pubs", "system", "msgs/s", "range", "p50", "p99", "errors", "lost"})
	var ratios []string
	for _, s := range strings.Split(*sizes, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || size < 8 {
			fatal(fmt.Errorf("bad size %q", s))
		}
		var sgs, jss []result
		runSG := func() {
			r, err := runSmartGo(size, *publishers, *window, *count, *warmup, *rate, *durable)
			if err != nil {
				fatal(fmt.Errorf("smartgo: %w", err))
			}
			sgs = append(sgs, r)
		}
		runJS := func() {
			r, err := runJetStream(size, *publishers, *window, *count, *warmup, *rate, *durable)
			if err != nil {
				fatal(fmt.Errorf("jetstream: %w", err))
			}
			jss = append(jss, r)
		}
		var order []func()
		if *only != "jetstream" {
			order = append(order, runSG)
		}
		if *only != "smartgo" {
			order = append(order, runJS)
		}
		if *factor > 0 {
			order = []func(){runJS, func() {
				r, err := runSmartGo(size, *publishers, *window, *count, *warmup, *factor*jss[len(jss)-1].rate, *durable)
				if err != nil {
					fatal(fmt.Errorf("smartgo: %w", err))
				}
				sgs = append(sgs, r)
			}}
		}
		for range *repeat {
			if *factor > 0 {
				for _, run := range order {
					run()
				}
				continue
			}
			for _, run := range order {
				run()
			}
			slices.Reverse(order)
		}
		if *only != "jetstream" {
			rows = append(rows, row(size, *publishers, "smartgo", sgs))
		}
		if *only != "smartgo" {
			rows = append(rows, row(size, *publishers, "jetstream", jss))
		}
		if *only == "" {
			sg, js := median(sgs), median(jss)
			ratios = append(ratios, fmt.Sprintf("size %d: rate smartgo/jetstream %.2fx (target >= 1.5x), p99 smartgo/jetstream %.2fx (target <= 1x)",
				size, sg.rate/js.rate, float64(sg.p99)/float64(max(js.p99, 1))))
		}
	}
	mode := "durable: fsync before ack on both"
	if !*durable {
		mode = "defaults: JetStream fsync every 2 min, SmartGo every 500 ms"
	}
	load := "as fast as each goes"
	if *factor > 0 {
		load = fmt.Sprintf("JetStream as fast as it goes, SmartGo paced at %.2gx the rate of the JetStream run before it", *factor)
	} else if *rate > 0 {
		load = fmt.Sprintf("paced at %.0f msgs/s on both", *rate)
	}
	fmt.Printf("%s; %d publishers x %d in flight, %s, %d messages per run, %d run(s) each\n", mode, *publishers, *window, load, *count, *repeat)
	printTable(rows)
	for _, r := range ratios {
		fmt.Println(r)
	}
}

func row(size, pubs int, sys string, rs []result) []string {
	r := median(rs)
	lo, hi := rs[0].rate, rs[0].rate
	for _, x := range rs {
		lo, hi = min(lo, x.rate), max(hi, x.rate)
	}
	return []string{strconv.Itoa(size), strconv.Itoa(pubs), sys, fmt.Sprintf("%.0f", r.rate), fmt.Sprintf("%.0f..%.0f", lo, hi),
		r.p50.Round(10 * time.Microsecond).String(), r.p99.Round(10 * time.Microsecond).String(), strconv.FormatInt(r.errors, 10),
		strconv.FormatInt(r.lost, 10)}
}

// median returns the median of each field of rs (errors and lost summed).
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	out := result{
		rate: pick(func(r result) float64 { return r.rate }),
		p50:  time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:  time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
	}
	for _, r := range rs {
		out.errors += r.errors
		out.lost += r.lost
	}
	return out
}

func printTable(rows [][]string) {
	w := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], len(c))
		}
	}
	for _, r := range rows {
		for i, c := range r {
			fmt.Printf("%-*s  ", w[i], c)
		}
		fmt.Println()
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}

// runSmartGo starts a registry and a broker in-process and runs the e2e
// benchmark of the smartgo bench command against them.
func runSmartGo(size, pubs, window int, count, warmup int64, rate float64, durable bool) (result, error) {
	dir, err := os.MkdirTemp("", "compare-smartgo-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	reg, err := registry.New(registry.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		return result{}, err
	}
	ctx := context.Background()
	if err := reg.Start(ctx); err != nil {
		return result{}, err
	}
	defer reg.Close()
	_, port, _ := net.SplitHostPort(reg.Addr().String())
	regAddr := net.JoinHostPort("127.0.0.1", port)
	so := store.DefaultOptions(filepath.Join(dir, "store"))
	so.SegmentSize = 256 << 20
	so.AsyncWrites = sgWrites
	if durable {
		so.FlushMode = store.FlushSync
	}
	b, err := broker.New(broker.Options{ListenAddr: "127.0.0.1:0", Registries: []string{regAddr}, BrokerName: "compare",
		ClusterName: "compare", AutoCreateTopic: true, AutoCreateGroup: true, LongPolling: true, Store: so})
	if err != nil {
		return result{}, err
	}
	defer b.Close()
	// Wait for the broker's registration.
	time.Sleep(500 * time.Millisecond)
	r, err := benchmark.Run(ctx, benchmark.Config{Mode: benchmark.E2E, Registries: []string{regAddr}, Topic: "Compare" + strconv.Itoa(size),
		Size: size, Count: count, Duration: 2 * time.Minute, Concurrency: pubs, Consumers: 1, Async: true, Window: window, Queues: 8, Warmup: warmup, Rate: rate,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return result{}, err
	}
	return result{rate: r.SendRate, p50: r.P50, p99: r.P99, errors: r.Errors, lost: max(0, r.Sent-r.Received)}, nil
}
