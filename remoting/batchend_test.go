package remoting

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// A processor that defers its answers to the end of the reader's batch
// (RegisterOptions.BatchEnd), as the broker's sends do: every request is
// answered, in order, whether BatchEnd answers on the reader or hands the
// answers to another goroutine and waits for it (then the answers must
// still leave with the reader's write: no writer is woken for them);
// BatchEnd runs once per batch, not per request; and it runs even when
// a bad frame ends the batch.
func TestRemotingBatchEnd(t *testing.T) {
	type held struct {
		c   *Conn
		req *protocol.Command
	}
	var (
		mu       sync.Mutex
		pending  []held
		ends     atomic.Int32
		answered atomic.Int32
	)
	answer := func(h held) {
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = append([]byte(nil), h.req.Body...)
		if err := h.c.WriteResponse(h.req, resp); err != nil {
			t.Errorf("answer: %v", err)
		}
		answered.Add(1)
	}
	batchEnd := func(c *Conn) {
		ends.Add(1)
		mu.Lock()
		hs := pending
		pending = nil
		mu.Unlock()
		if len(hs) == 0 {
			return
		}
		if string(hs[0].req.Body) == "elsewhere" || hs[0].req.Opaque%2 == 0 {
			// Another goroutine answers while the reader waits.
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, h := range hs {
					answer(h)
				}
			}()
			wg.Wait()
			return
		}
		for _, h := range hs {
			answer(h)
		}
	}
	const code = codeEcho + 2
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterWith(code, PoolSend, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			mu.Lock()
			pending = append(pending, held{c, req})
			mu.Unlock()
			return nil, nil // answered at the batch's end
		}), RegisterOptions{Inline: true, BatchEnd: batchEnd})
	})
	frame := func(i int, body string) []byte {
		req := protocol.NewRequest(code, nil, []byte(body))
		req.Opaque = int32(i)
		b, err := protocol.EncodeFrame(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// Rounds of requests written at once: each is answered in order.
	r := dialRaw(t, addr)
	const rounds, per = 20, 25
	for round := range rounds {
		var all []byte
		for j := range per {
			i := round*per + j + 1
			all = append(all, frame(i, strconv.Itoa(i))...)
		}
		if _, err := r.nc.Write(all); err != nil {
			t.Fatal(err)
		}
		for j := range per {
			i := round*per + j + 1
			resp, err := r.read()
			if err != nil {
				t.Fatalf("response %d: %v (batch ends %d)", i, err, ends.Load())
			}
			if resp.Opaque != int32(i) || !resp.IsResponse() || string(resp.Body) != strconv.Itoa(i) {
				t.Fatalf("response %d: %v %q", i, resp, resp.Body)
			}
		}
	}
	if e := ends.Load(); e < rounds || e > rounds*per/2 {
		t.Fatalf("BatchEnd ran %d times for %d requests in %d writes: not once per batch", e, rounds*per, rounds)
	}

	// A request answered from elsewhere right before the reader writes.
	if _, err := r.nc.Write(frame(9001, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if resp, err := r.read(); err != nil || resp.Opaque != 9001 || string(resp.Body) != "elsewhere" {
		t.Fatalf("answer given by another goroutine at the batch's end: %v %v", resp, err)
	}

	// Requests followed by a frame too short to decode: the connection
	// closes, but the batch's deferred work is done.
	before := answered.Load()
	bad := []byte{0, 0, 0, 4, 0, 0, 0, 200} // header length past the frame
	if _, err := r.nc.Write(append(append(frame(9002, "a"), frame(9003, "b")...), bad...)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the batch before a bad frame answered", func() bool { return answered.Load() == before+2 })
}
