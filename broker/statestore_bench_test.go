package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
)

// BenchmarkStateStoreSetPath serves SETs the way `smartgo standalone`'s
// MQTT poller does under the Azure IoT Operations client's load, in
// process and without the network: rounds of ssSetRound mutations
// (InvokeDeferred each, then Complete each: one drain per round), over
// one key space of 20,000 keys with 100-byte values, each request with
// its client's timestamp, a dedup key of a 16-byte correlation id and a
// response topic of the Azure client's shape, and a 10 s TTL. It is the
// work a SET does that a GET does not: Prepare's cache miss, the record,
// the log's write and dispatch, Apply. cpu-ns/op is the process's CPU
// time per SET (the store's goroutines included; on a busy machine it
// moves less than ns/op), log-B/op the commitlog's bytes per SET.
func BenchmarkStateStoreSetPath(b *testing.B) {
	const keys, clients, ssSetRound = 20000, 50, 10
	br, s := ssBenchOpen(b, 16<<20)
	var err error
	val := []byte(strings.Repeat("x", 100))
	type setReq struct {
		req protocol.StateStoreRequest
		cmd statestore.Command
	}
	reqs := make([]setReq, keys)
	for i := range reqs {
		k := []byte(fmt.Sprintf("k-%d-%d", i%clients, i/clients))
		client := "azure-cpu-0-" + strconv.Itoa(i%clients)
		topic := "clients/" + client + "/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response"
		r := &reqs[i]
		r.req = protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(k, s.Shards())), ClientID: client, Timestamp: ssTS(), HasTimestamp: true,
			Payload: statestore.AppendRequest(nil, []byte("SET"), k, val), DedupTTLMillis: 10000,
			DedupKey: statestore.DedupKey([]byte("0123456789abcdef"), topic)}
		if r.cmd, err = statestore.ParseCommand(r.req.Payload); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	var resp protocol.StateStoreResponse
	pend := make([]*StateStorePending, 0, ssSetRound)
	start := br.Store().MaxPhysicalOffset()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; {
		for n := 0; n < ssSetRound && i < b.N; n, i = n+1, i+1 {
			r := &reqs[i%keys]
			binary.BigEndian.PutUint64(r.req.DedupKey[4:], uint64(i)) // a new correlation id: the cache misses
			p, err := s.InvokeDeferred(ctx, time.Time{}, &r.req, &r.cmd, nil, &resp)
			if err != nil || p == nil {
				b.Fatalf("SET %d: pending %v, err %v, reply %q", i, p, err, resp.Reply)
			}
			pend = append(pend, p)
		}
		for _, p := range pend {
			if err := p.Complete(&resp); err != nil || string(resp.Reply) != "+OK\r\n" {
				b.Fatalf("SET: %v %q", err, resp.Reply)
			}
		}
		pend = pend[:0]
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(br.Store().MaxPhysicalOffset()-start)/float64(b.N), "log-B/op")
}

// ssBenchOpen starts a broker with commitlog segments of segment bytes
// and its state store (8 shards), closed when b ends.
func ssBenchOpen(b *testing.B, segment int64) (*Broker, *StateStore) {
	so := store.DefaultOptions(b.TempDir())
	so.SegmentSize = segment
	so.WarmSegments = false
	br, err := New(Options{BrokerName: "broker-bench", ClusterName: "B", ListenAddr: "127.0.0.1:0", Store: so})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close() })
	s, err := OpenStateStore(br, StateStoreOptions{Shards: 8, SnapshotInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return br, s
}
