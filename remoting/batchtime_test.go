package remoting

import (
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Conn.BatchTime is one clock reading per batch of the reader: the inline
// processors of a batch's requests and its BatchEnd read the same time,
// taken after the requests were written, and the next batch reads the
// clock again.
func TestRemotingBatchTime(t *testing.T) {
	var (
		mu     sync.Mutex
		times  []int64 // BatchTime of the batch's requests, as monotonic offsets
		bad    []string
		ends   [][]int64 // each BatchEnd: the batch's times, then its own
		origin = time.Now()
	)
	rel := func(c *Conn) int64 { return int64(c.BatchTime().Sub(origin)) }
	const code = codeEcho + 3
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterWith(code, PoolSend, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			a, b := rel(c), rel(c)
			mu.Lock()
			if a != b {
				bad = append(bad, "two calls in one request differ")
			}
			times = append(times, a)
			mu.Unlock()
			return protocol.NewResponse(protocol.Success, ""), nil
		}), RegisterOptions{Inline: true, BatchEnd: func(c *Conn) {
			mu.Lock()
			ends = append(ends, append(times, rel(c)))
			times = nil
			mu.Unlock()
		}})
	})
	r := dialRaw(t, addr)
	const rounds, per = 10, 20
	var last int64 = -1
	for round := range rounds {
		var all []byte
		for j := range per {
			req := protocol.NewRequest(code, nil, nil)
			req.Opaque = int32(round*per + j + 1)
			b, err := protocol.EncodeFrame(req)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		written := int64(time.Since(origin))
		if _, err := r.nc.Write(all); err != nil {
			t.Fatal(err)
		}
		for range per {
			if resp, err := r.read(); err != nil || resp.Code != protocol.Success {
				t.Fatalf("round %d: %v %v", round, resp, err)
			}
		}
		read := int64(time.Since(origin))
		mu.Lock()
		got := ends
		ends = nil
		mu.Unlock()
		n := 0
		for _, e := range got {
			own := e[len(e)-1]
			for _, at := range e[:len(e)-1] {
				if at != own {
					t.Fatalf("round %d: a request read %d, its batch end %d", round, at, own)
				}
			}
			if own < written || own > read || own < last {
				t.Fatalf("round %d: batch time %d, requests written at %d, answered by %d, last batch %d", round, own, written, read, last)
			}
			last = own
			n += len(e) - 1
		}
		if n != per {
			t.Fatalf("round %d: %d requests in batch ends, want %d", round, n, per)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatal(bad[0])
	}
}
