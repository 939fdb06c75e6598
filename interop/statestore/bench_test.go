package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
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
	"github.com/smartgo/smartgo/mqtt/packets"
	"github.com/smartgo/smartgo/statestore"
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
	// The same load from lean MQTT clients (one request in flight each,
	// like redis-benchmark without -P), so the comparison is not one of
	// load generators (paho vs hand-written C).
	for _, verb := range []string{"SET", "GET"} {
		rawStateStoreLoad(t, e.addr, verb, benchClients, perClient, val)
	}

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

// rawStateStoreLoad runs clients lean MQTT v5 clients (mqtt/packets on a
// plain socket) doing perClient requests of verb each, one at a time, and
// logs ops/s and latency percentiles. The response's PUBACK goes out with
// the next request.
func rawStateStoreLoad(t *testing.T, addr, verb string, clients, perClient int, val []byte) {
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
	p := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))] }
	t.Logf("smartgo %s (lean MQTT clients): %d ops, %.0f ops/s, p50 %v, p99 %v", verb, len(all),
		float64(len(all))/el.Seconds(), p(0.50).Round(time.Microsecond), p(0.99).Round(time.Microsecond))
}

func rawStateStoreClient(nc net.Conn, id, verb string, idx, n int, val []byte) ([]time.Duration, error) {
	v := packets.Version5
	dec, _ := packets.NewDecoder(packets.Options{MaxPacketSize: 1 << 20})
	var buf []byte
	tmp := make([]byte, 16<<10)
	read := func() (packets.Packet, error) {
		for {
			if len(buf) > 0 {
				p, k, err := dec.Next(v, buf)
				if err == nil {
					buf = buf[k:]
					return p, nil
				}
				if !errors.Is(err, packets.ErrIncomplete) {
					return nil, err
				}
			}
			_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			k, err := nc.Read(tmp)
			buf = append(buf, tmp[:k]...)
			if err != nil && k == 0 {
				return nil, err
			}
		}
	}
	out, _ := packets.AppendPacket(nil, &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60}, v)
	if _, err := nc.Write(out); err != nil {
		return nil, err
	}
	if p, err := read(); err != nil {
		return nil, err
	} else if _, ok := p.(*packets.Connack); !ok {
		return nil, fmt.Errorf("want CONNACK, got %T", p)
	}
	resp := "clients/" + id + "/services/statestore/_any_/command/invoke/response"
	corr := make([]byte, 16)
	lat := make([]time.Duration, 0, n)
	var owed []byte // the PUBACK of the last response
	for j := 0; j < n; j++ {
		key := []byte("key:" + strconv.Itoa((idx*n+j)%10000))
		args := [][]byte{[]byte(verb), key}
		if verb == "SET" {
			args = append(args, val)
		}
		req := &packets.Publish{QoS: 1, PacketID: uint16(j%65535 + 1), Topic: statestore.RequestTopic,
			Payload: statestore.AppendRequest(nil, args...)}
		pr := &req.Properties
		pr.Present.Add(packets.PropResponseTopic)
		pr.Present.Add(packets.PropCorrelationData)
		pr.Present.Add(packets.PropMessageExpiry)
		pr.ResponseTopic, pr.MessageExpiry = resp, 10
		binary.BigEndian.PutUint64(corr, uint64(j))
		pr.CorrelationData = corr
		pr.User = []packets.UserProperty{{Key: statestore.PropTimestamp, Value: statestore.HLC{Wall: time.Now().UnixMilli(), Node: id}.String()}}
		t0 := time.Now()
		out = append(out[:0], owed...)
		out, _ = packets.AppendPacket(out, req, v)
		if _, err := nc.Write(out); err != nil {
			return lat, err
		}
		acked, answered := false, false
		for !acked || !answered {
			p, err := read()
			if err != nil {
				return lat, fmt.Errorf("request %d: %w", j, err)
			}
			switch p := p.(type) {
			case *packets.Puback:
				acked = p.PacketID == req.PacketID
			case *packets.Publish:
				if p.Topic == resp && bytes.Equal(p.Properties.CorrelationData, corr) {
					if len(p.Payload) > 0 && p.Payload[0] == '-' {
						return lat, fmt.Errorf("request %d: %q", j, p.Payload)
					}
					answered = true
					lat = append(lat, time.Since(t0))
				}
				owed, _ = packets.AppendPacket(owed[:0], &packets.Puback{PacketID: p.PacketID}, v)
			}
		}
	}
	return lat, nil
}
