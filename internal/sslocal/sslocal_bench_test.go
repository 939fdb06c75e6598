package sslocal

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
)

// BenchmarkLocalGetHop serves GETs the way the MQTT front serves one on
// its poller: router.InvokeCommandNow into the shard of a broker in this
// process (the route, the adapter, the broker's admission and metrics,
// then the engine's lookup), each request with its client id and
// timestamp, over keys of 100-byte values set first. With 64 keys the
// engine's lookup stays in the cache and the hop around it is most of
// what is measured; with 20,000 keys (BenchmarkStateStoreAzureCPU's) the
// lookup misses as on the server. "par" serves from GOMAXPROCS
// goroutines at once, as the front's pollers do (run with -cpu 2).
// cpu-ns/op is the process's CPU time per GET.
func BenchmarkLocalGetHop(b *testing.B) {
	for _, keys := range []int{64, 20000} {
		for _, par := range []bool{false, true} {
			name := fmt.Sprintf("keys=%d", keys)
			if par {
				name += "/par"
			}
			b.Run(name, func(b *testing.B) { benchLocalGet(b, keys, par) })
		}
	}
}

func benchLocalGet(b *testing.B, keys int, par bool) {
	so := store.DefaultOptions(b.TempDir())
	so.SegmentSize = 64 << 20
	so.WarmSegments = false
	br, err := broker.New(broker.Options{BrokerName: "broker-bench", ClusterName: "B", ListenAddr: "127.0.0.1:0", Store: so})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close() })
	ss, err := broker.OpenStateStore(br, broker.StateStoreOptions{Shards: 8, SnapshotInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ss.Close() })
	r, err := router.New(router.Options{Brokers: map[string]string{"broker-bench": br.Addr()}, Shards: 8,
		Local: map[string]router.LocalBroker{br.Addr(): New(ss)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	ctx := context.Background()
	val := []byte(strings.Repeat("x", 100))
	type getReq struct {
		req protocol.StateStoreRequest
		cmd statestore.Command
	}
	gets := make([]getReq, keys)
	ts := statestore.HLC{Wall: time.Now().UnixMilli(), Node: "azure-cpu-0"}.String()
	for i := range gets {
		k := []byte(fmt.Sprintf("k-%d-%d", i%50, i/50))
		client := "azure-cpu-0-" + strconv.Itoa(i%50)
		set := &protocol.StateStoreRequest{ClientID: client, Timestamp: ts, HasTimestamp: true, Payload: statestore.AppendRequest(nil, []byte("SET"), k, val)}
		if resp, err := r.Invoke(ctx, k, set); err != nil || string(resp.Reply) != "+OK\r\n" {
			b.Fatalf("SET: %v %q", err, resp.Reply)
		}
		g := &gets[i]
		g.req = protocol.StateStoreRequest{ClientID: client, Timestamp: ts, HasTimestamp: true,
			Payload: statestore.AppendRequest(nil, []byte("GET"), k)}
		if g.cmd, err = statestore.ParseCommand(g.req.Payload); err != nil {
			b.Fatal(err)
		}
	}
	get := func(g *getReq, resp *protocol.StateStoreResponse) {
		if ok, err := r.InvokeCommandNow(ctx, time.Time{}, time.Time{}, &g.cmd, &g.req, resp); !ok || err != nil || len(resp.Reply) < 100 {
			panic(fmt.Sprintf("GET: served %v, err %v, reply %q", ok, err, resp.Reply))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu, err := testutil.ProcessCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	if par {
		var next atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(7919))
			var resp protocol.StateStoreResponse
			for pb.Next() {
				i++
				get(&gets[i%keys], &resp)
			}
		})
	} else {
		var resp protocol.StateStoreResponse
		for i := 0; i < b.N; i++ {
			get(&gets[i%keys], &resp)
		}
	}
	b.StopTimer()
	end, err := testutil.ProcessCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(end.Since(cpu))/float64(b.N), "cpu-ns/op")
}
