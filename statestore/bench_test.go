package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
)

const benchKeys = 1024

func benchValue() []byte { return bytes.Repeat([]byte("v"), 64) }

func benchSetRequests() []*Request {
	reqs := make([]*Request, benchKeys)
	for i := range reqs {
		r := &Request{ClientID: "bench", Payload: cmd("SET", "key-"+strconv.Itoa(i), string(benchValue()))}
		r.SetUserProperty(PropTimestamp, "1696374425000:0:01a201b4-ecff-7be4-923c-711a2b80d410")
		reqs[i] = r
	}
	return reqs
}

// baselineMap is the raw work a key-value table cannot avoid: a map write
// with copies of key and value for SET; a map read and a RESP bulk reply
// for GET. The engine benchmarks report their cost as a multiple of it.
type baselineMap map[string][]byte

func (m baselineMap) set(key, value []byte) { m[string(key)] = bytes.Clone(value) }
func (m baselineMap) get(key []byte) []byte { return bulkReply(m[string(key)]) }

func timeBaseline(n int, f func(i int)) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		f(i)
	}
	return time.Since(start)
}

// BenchmarkStateStoreSet measures Prepare+Apply of SET with 64-byte
// values over 1024 keys (parse, checks, version, entry encoding, entry
// decoding, apply, history), next to a plain map write.
func BenchmarkStateStoreSet(b *testing.B) {
	reqs := benchSetRequests()
	keys := make([][]byte, benchKeys)
	for i := range keys {
		keys[i] = []byte("key-" + strconv.Itoa(i))
	}
	val := benchValue()
	b.Run("baseline-map", func(b *testing.B) {
		m := baselineMap{}
		b.SetBytes(64)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.set(keys[i%benchKeys], val)
		}
	})
	b.Run("engine", func(b *testing.B) {
		e := mustEngine(b, Options{})
		now := t0
		m := baselineMap{}
		base := timeBaseline(b.N, func(i int) { m.set(keys[i%benchKeys], val) })
		b.SetBytes(64)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			entry, _, needsLog := e.Prepare(reqs[i%benchKeys], now)
			if !needsLog {
				b.Fatal("SET not logged")
			}
			out, err := e.Apply(entry, now)
			if err != nil || len(out.Reply.Payload) != 5 {
				b.Fatal(err, out.Reply.Payload)
			}
		}
		b.ReportMetric(float64(time.Since(start))/float64(base), "x-baseline")
	})
}

// BenchmarkStateStoreGet measures Prepare of GET (served from the table)
// with 64-byte values, next to a plain map read plus bulk reply.
func BenchmarkStateStoreGet(b *testing.B) {
	e := mustEngine(b, Options{})
	m := baselineMap{}
	keys := make([][]byte, benchKeys)
	gets := make([]*Request, benchKeys)
	for i, r := range benchSetRequests() {
		entry, _, _ := e.Prepare(r, t0)
		apply(b, e, entry, t0)
		keys[i] = []byte("key-" + strconv.Itoa(i))
		m.set(keys[i], benchValue())
		gets[i] = &Request{ClientID: "bench", Payload: cmd("GET", string(keys[i]))}
		gets[i].SetUserProperty(PropTimestamp, "1696374425000:0:01a201b4-ecff-7be4-923c-711a2b80d410")
	}
	b.Run("baseline-map", func(b *testing.B) {
		b.SetBytes(64)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if len(m.get(keys[i%benchKeys])) != 71 {
				b.Fatal("bad reply")
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		base := timeBaseline(b.N, func(i int) { m.get(keys[i%benchKeys]) })
		b.SetBytes(64)
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			_, out, needsLog := e.Prepare(gets[i%benchKeys], t0)
			if needsLog || len(out.Reply.Payload) != 71 {
				b.Fatalf("GET: %q", out.Reply.Payload)
			}
		}
		b.ReportMetric(float64(time.Since(start))/float64(base), "x-baseline")
	})
}

// BenchmarkStateStoreParse measures ParseCommand of the Go SDK's SET NX PX.
func BenchmarkStateStoreParse(b *testing.B) {
	p := []byte("*6\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n")
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCommand(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateStoreSetNew measures Prepare+Apply of SETs the way the
// Azure IoT Operations client sends them: a new key each time, 100-byte
// values, a dedup key (16-byte correlation id and the client's response
// topic) and a 10 s expiry, so the key table grows and the response cache
// turns over at its bound. allocs/op counts what a SET leaves behind.
func BenchmarkStateStoreSetNew(b *testing.B) {
	e := mustEngine(b, Options{})
	val := string(bytes.Repeat([]byte("x"), 100))
	topic := "clients/bench-client-17/services/statestore/_any_/command/invoke/response"
	reqs := make([]Request, b.N)
	cmds := make([]Command, b.N)
	for i := range reqs {
		r := &reqs[i]
		*r = Request{ClientID: "bench-client-17", Payload: cmd("SET", "key-"+strconv.Itoa(i), val), DedupTTL: 10 * time.Second}
		r.SetUserProperty(PropTimestamp, "1696374425000:0:01a201b4-ecff-7be4-923c-711a2b80d410")
		r.DedupKey = AppendDedupKey(nil, []byte(fmt.Sprintf("%016x", i)), topic)
		var err error
		if cmds[i], err = ParseCommand(r.Payload); err != nil {
			b.Fatal(err)
		}
		r.Command = &cmds[i]
	}
	b.SetBytes(100)
	b.ReportAllocs()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	live := ms.HeapAlloc
	b.ResetTimer()
	var entry []byte
	for i := range reqs {
		var needsLog bool
		entry, _, needsLog = e.PrepareAppend(entry[:0], &reqs[i], t0)
		if !needsLog {
			b.Fatal("SET not logged")
		}
		out, err := e.Apply(entry, t0)
		if err != nil || len(out.Reply.Payload) != 5 {
			b.Fatal(err, out.Reply.Payload)
		}
	}
	b.StopTimer()
	// What the keys keep: the heap still in use once the garbage is
	// collected (the response cache's share is bounded by DedupLen).
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric((float64(ms.HeapAlloc)-float64(live))/float64(b.N), "live-B/key")
	runtime.KeepAlive(reqs)
	runtime.KeepAlive(e)
}

// BenchmarkStateStoreSetDedup measures Prepare+Apply of SETs the way a
// broker's eight shards see the Azure client's: 20,000 keys over eight
// engines, 100-byte values, each request with a new dedup key of the
// client's shape (16 bytes of correlation data and a ~95-byte response
// topic) and a 10 s TTL, so the response cache is full (DedupLen) and
// every SET adds one reply and evicts the oldest. The table, the caches
// and the histories are larger than the CPU's caches, as in a server.
func BenchmarkStateStoreSetDedup(b *testing.B) {
	const keys, shards = 20000, 8
	engines := make([]*Engine, shards)
	for i := range engines {
		engines[i] = mustEngine(b, Options{})
	}
	val := bytes.Repeat([]byte("x"), 100)
	reqs := make([]*Request, keys)
	for i := range reqs {
		topic := "clients/azure-cpu-0-" + strconv.Itoa(i%50) + "/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response"
		r := &Request{ClientID: "azure-cpu-0-" + strconv.Itoa(i%50), Payload: AppendRequest(nil, []byte("SET"), []byte(fmt.Sprintf("k-%d-%d", i%50, i/50)), val),
			DedupKey: DedupKey([]byte("0123456789abcdef"), topic), DedupTTL: 10 * time.Second}
		r.SetUserProperty(PropTimestamp, "1696374425000:0:c")
		reqs[i] = r
	}
	now := t0
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := reqs[i%keys]
		binary.BigEndian.PutUint64(r.DedupKey[4:], uint64(i)) // a new correlation id: the cache misses
		e := engines[i%shards]
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
		}
		entry, _, needsLog := e.PrepareAppend(buf[:0], r, now)
		if !needsLog {
			b.Fatal("SET not logged")
		}
		buf = entry
		if out, err := e.Apply(entry, now); err != nil || len(out.Reply.Payload) != 5 {
			b.Fatal(err, out.Reply.Payload)
		}
	}
}
