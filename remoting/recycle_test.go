package remoting

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

const (
	codeKeep       int32 = 9201 // keeps every body it gets (not NoRetain)
	codeEchoNR     int32 = 9202 // NoRetain echo on a worker
	codeEchoNRLine int32 = 9203 // NoRetain echo, inline
)

// fillBody fills b with bytes derived from seed, so that any overwrite by
// another frame's bytes shows.
func fillBody(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// A read buffer whose frames are a mix of held ones (like unrecycled
// commands) and recycled ones: the held frames keep their bytes while
// megabytes more pass through reused chunks, and with every frame recycled
// the buffer reuses its chunks instead of taking new ones.
func TestRemotingRecycleReadBufMixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var want [][]byte
	large := 0
	for i := 0; i < 3000; i++ {
		n := rng.IntN(9000)
		if i%97 == 0 {
			n = readChunk + rng.IntN(readChunk) // larger than a chunk
			large++
		}
		body := make([]byte, n)
		fillBody(body, uint64(i))
		stream = binary.BigEndian.AppendUint32(stream, uint32(4+n))
		stream = binary.BigEndian.AppendUint32(stream, uint32(i))
		stream = append(stream, body...)
		want = append(want, stream[len(stream)-4-n:])
	}
	for _, mode := range []string{"mixed", "all-recycled"} {
		var rb readBuf
		r := &chunkReader{b: stream, sizes: []byte{255, 255, 255, 255, 255, 255, 255, 255, 30, 255, 3}}
		var held [][]byte
		var heldIdx []int
		made := chunksMade.Load()
		i := 0
		for {
			for {
				f, err := rb.next(0)
				if err != nil {
					t.Fatal(err)
				}
				if f == nil {
					break
				}
				if !bytes.Equal(f, want[i]) {
					t.Fatalf("%s: frame %d differs when read", mode, i)
				}
				if mode == "mixed" && i%5 == 0 {
					rb.k.refs.Add(1) // held for ever, like an unrecycled body
					held = append(held, f)
					heldIdx = append(heldIdx, i)
				}
				i++
			}
			err := rb.fill(r, 0)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if i != len(want) {
			t.Fatalf("%s: %d frames, want %d", mode, i, len(want))
		}
		for j, f := range held {
			if !bytes.Equal(f, want[heldIdx[j]]) {
				t.Fatalf("%s: held frame %d was overwritten", mode, heldIdx[j])
			}
		}
		rb.release()
		if mode == "all-recycled" {
			// Without reuse the ~16 MB would take ~280 chunks. With it,
			// each large frame takes a chunk of its own and, after it, a
			// standard one from the pool (a new one at worst: the race
			// detector's pool drops some); the rest reuse in place.
			n := chunksMade.Load() - made
			t.Logf("all-recycled: %d chunks allocated for %d bytes (%d large frames)", n, len(stream), large)
			if n > int64(2*large+8) {
				t.Fatalf("all-recycled: %d chunks allocated for %d bytes", n, len(stream))
			}
		}
	}
}

// keeper is a processor that keeps the bodies it receives (without the
// NoRetain promise), to check later that nothing overwrote them.
type keeper struct {
	mu     sync.Mutex
	bodies map[string][]byte // protected by mu
}

func (k *keeper) ProcessRequest(c *Conn, req *protocol.Command) (*protocol.Command, error) {
	k.mu.Lock()
	k.bodies[req.ExtFields["v"]] = req.Body
	k.mu.Unlock()
	return protocol.NewResponse(protocol.Success, ""), nil
}

func recycleServer(t *testing.T, opts Options) (*keeper, string) {
	k := &keeper{bodies: map[string][]byte{}}
	_, addr, _ := startServer(t, opts, func(s *Server) {
		s.Register(codeKeep, PoolAdmin, k)
		s.RegisterWith(codeEchoNR, PoolDefault, ProcessorFunc(echo), RegisterOptions{NoRetain: true})
		s.RegisterWith(codeEchoNRLine, PoolSend, ProcessorFunc(echo), RegisterOptions{NoRetain: true, Inline: true})
	})
	return k, addr
}

// Under load, with both serialize types and bodies from empty to larger
// than a chunk: NoRetain echoes (on workers and inline) return exactly the
// bytes sent while their buffers are reused; a processor without the
// promise finds every body it kept unchanged at the end; responses the
// client does not recycle keep their bytes too, while the recycled ones
// let the client's chunks be reused.
func TestRemotingRecycleUnderLoad(t *testing.T) {
	k, addr := recycleServer(t, Options{})
	sizes := []int{0, 1, 100, 1000, 4000, 9000, copyBodyMax + 1, 40000, readChunk + 100}
	const goroutines, ops = 12, 250
	type kept struct {
		resp *protocol.Command
		want []byte
	}
	for _, st := range []protocol.SerializeType{protocol.SerializeJSON, protocol.SerializeRocketMQ} {
		c := newClient(t, ClientOptions{SerializeType: st})
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		keptResp := make([][]kept, goroutines)
		sentKeep := make([]map[string][]byte, goroutines)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			sentKeep[g] = map[string][]byte{}
			go func(g int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), uint64(st)))
				for i := 0; i < ops; i++ {
					v := fmt.Sprintf("%v-%d-%d", st, g, i)
					body := make([]byte, sizes[rng.IntN(len(sizes))])
					fillBody(body, uint64(g)<<32|uint64(i)|uint64(st)<<60)
					code := codeEchoNR
					switch i % 10 {
					case 0:
						code = codeKeep
						sentKeep[g][v] = body
					case 1, 2, 3, 4:
						code = codeEchoNRLine
					}
					req := protocol.NewRequest(code, nil, body)
					req.ExtFields = protocol.ExtFields{"v": v}
					resp, err := c.Invoke(context.Background(), addr, req)
					if err != nil {
						errs <- err
						return
					}
					if code == codeKeep {
						resp.Recycle()
						continue
					}
					if !bytes.Equal(resp.Body, body) || resp.ExtFields["v"] != v {
						errs <- fmt.Errorf("%s: echo of %d bytes came back as %d other bytes", v, len(body), len(resp.Body))
						return
					}
					if i%7 == 0 {
						keptResp[g] = append(keptResp[g], kept{resp, body})
						continue
					}
					resp.Recycle()
					if resp.Body != nil {
						errs <- fmt.Errorf("%s: Body not cleared by Recycle", v)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for g := range keptResp {
			for _, kr := range keptResp[g] {
				if !bytes.Equal(kr.resp.Body, kr.want) {
					t.Fatalf("%v: an unrecycled response's body changed", st)
				}
			}
		}
		k.mu.Lock()
		for g := range sentKeep {
			for v, want := range sentKeep[g] {
				if got, ok := k.bodies[v]; !ok || !bytes.Equal(got, want) {
					k.mu.Unlock()
					t.Fatalf("kept body %s changed (%d bytes, want %d)", v, len(got), len(want))
				}
			}
		}
		k.mu.Unlock()
	}
}

// NoRetain echoes whose responses the client recycles reuse the chunks on
// both ends: far fewer chunks are allocated than the bytes moved would
// fill.
func TestRemotingRecycleReusesChunks(t *testing.T) {
	_, addr := recycleServer(t, Options{})
	c := newClient(t, ClientOptions{})
	body := make([]byte, 4000)
	fillBody(body, 7)
	const goroutines, ops = 4, 1500
	made := chunksMade.Load()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < ops; i++ {
				code := codeEchoNR
				if (i+g)%2 == 0 {
					code = codeEchoNRLine
				}
				resp, err := c.Invoke(context.Background(), addr, protocol.NewRequest(code, nil, body))
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(resp.Body, body) {
					errs <- fmt.Errorf("echo came back changed")
					return
				}
				resp.Recycle()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Without reuse: 2 directions x 6000 frames x ~4 KiB / 64 KiB ~ 740
	// chunks (more, as a chunk is left with up to 4 KiB unused).
	noReuse := int64(2 * goroutines * ops * len(body) / readChunk)
	n := chunksMade.Load() - made
	t.Logf("%d chunks allocated, %d without any reuse", n, noReuse)
	if n > noReuse/4 {
		t.Fatalf("%d chunks allocated, %d without any reuse", n, noReuse)
	}
}

// Recycle is a no-op on commands that do not come from a connection and
// on a second call.
func TestRemotingRecycleNoop(t *testing.T) {
	req := protocol.NewRequest(codeEcho, nil, []byte("x"))
	req.Recycle()
	if string(req.Body) != "x" {
		t.Fatal("Recycle cleared a command that owns its body")
	}
	frame, err := protocol.EncodeFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	k := getChunk(readChunk)
	cmd, err := protocol.DecodeFrameRef(frame[4:], k)
	if err != nil {
		t.Fatal(err)
	}
	k.refs.Add(1)
	cmd.Recycle()
	cmd.Recycle()
	if n := k.refs.Load(); n != 1 || cmd.Body != nil {
		t.Fatalf("after two Recycles: %d references, body %q", n, cmd.Body)
	}
}

// A NoRetain processor that answers later (long polling) keeps req: its
// header fields stay valid after the connection recycled it, while other
// requests reuse the buffer, and the late answer reaches the caller.
// Requests with unknown codes are recycled by the connection, in between.
func TestRemotingRecycleDeferredAnswer(t *testing.T) {
	const codeLater int32 = 9204
	held := make(chan heldReq, 64)
	_, addr, _ := startServer(t, Options{}, func(s *Server) {
		s.RegisterWith(codeLater, PoolPull, ProcessorFunc(func(c *Conn, req *protocol.Command) (*protocol.Command, error) {
			held <- heldReq{c, req}
			return nil, nil
		}), RegisterOptions{NoRetain: true, Inline: true})
		s.RegisterWith(codeEchoNR, PoolDefault, ProcessorFunc(echo), RegisterOptions{NoRetain: true})
	})
	go func() { // answers every held request after more traffic went by
		for h := range held {
			resp := protocol.NewResponse(protocol.Success, "late")
			resp.ExtFields = protocol.ExtFields{"v": h.req.ExtFields["v"]}
			_ = h.c.WriteResponse(h.req, resp)
		}
	}()
	c := newClient(t, ClientOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			body := make([]byte, 3000)
			for i := 0; i < 100; i++ {
				v := fmt.Sprintf("%d-%d", g, i)
				code := codeEchoNR
				switch i % 4 {
				case 0:
					code = codeLater
				case 1:
					code = 9299 // not supported
				}
				fillBody(body, uint64(g*1000+i))
				req := protocol.NewRequest(code, nil, body)
				req.ExtFields = protocol.ExtFields{"v": v}
				resp, err := c.Invoke(context.Background(), addr, req)
				switch {
				case err != nil:
				case code == codeLater && (resp.Remark != "late" || resp.ExtFields["v"] != v):
					err = fmt.Errorf("late answer %v %v for %s", resp, resp.ExtFields, v)
				case code == codeEchoNR && !bytes.Equal(resp.Body, body):
					err = fmt.Errorf("echo %s changed", v)
				case code == 9299 && resp.Code != protocol.RequestCodeNotSupported:
					err = fmt.Errorf("unknown code answered %v", resp)
				}
				if err != nil {
					errs <- err
					return
				}
				resp.Recycle()
			}
		}(g)
	}
	wg.Wait()
	close(held)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

type heldReq struct {
	c   *Conn
	req *protocol.Command
}
