package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
)

// smallDisk opens a store on a simulated disk of capacity bytes
// (vfs.Faulty), others bytes of which belong to someone else.
func smallDisk(t *testing.T, capacity, others int64, mutate func(*Options)) (*Store, *vfs.Faulty, string) {
	t.Helper()
	fs := vfs.NewFaulty(nil)
	fs.SetCapacity(capacity)
	fs.Fill(others)
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) {
		o.FS = fs
		o.DiskUsage = nil // the simulated disk's Statfs
		o.SegmentSize = 1 << 20
		o.Preallocate = 128 << 10
		o.MaxMessageSize = 64 << 10
		o.CQEntriesPerFile = 4096
		if mutate != nil {
			mutate(o)
		}
	})
	return s, fs, root
}

// producers puts numbered messages from n goroutines at full speed until
// stop is closed, recording every acknowledged one and counting refusals.
type producers struct {
	mu      sync.Mutex
	acked   map[string]PutResult
	refused atomic.Int64
	other   atomic.Pointer[error]
	wg      sync.WaitGroup
}

// producerKind is how startProducers' goroutines put.
type producerKind int

const (
	singlePuts  producerKind = iota // Put
	withBatches                     // Put, and PutBatch every fourth time
	asyncPuts                       // PutAsync (written behind), each answer awaited
)

// putAsyncWait is PutAsync waiting for the answer, as a client waits for
// its send's response.
func putAsyncWait(s *Store, m *record.Message) (PutResult, error) {
	type answer struct {
		res PutResult
		err error
	}
	ch := make(chan answer, 1)
	res, pending, err := s.PutAsync(m, true, func(r PutResult, err error) { ch <- answer{r, err} })
	if !pending {
		return res, err
	}
	a := <-ch
	return a.res, a.err
}

func startProducers(t *testing.T, s *Store, n int, stop <-chan struct{}, kind producerKind) *producers {
	p := &producers{acked: map[string]PutResult{}}
	for g := range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("d", 500))
				var res PutResult
				var err error
				if kind == withBatches && i%4 == 0 {
					tmpl := newMsg(msgSpec{topic: "F", qid: int32(g % 2)})
					items := []record.BatchItem{{Body: []byte(body + "-a")}, {Body: []byte(body + "-b")}}
					var br BatchResult
					br, err = s.PutBatch(context.Background(), tmpl, items)
					if err == nil {
						p.mu.Lock()
						for k, it := range items {
							r := br.PutResult
							r.PhysicalOffset = br.PhysicalOffsets[k]
							p.acked[string(it.Body)] = r
						}
						p.mu.Unlock()
					}
				} else {
					m := newMsg(msgSpec{topic: "F", qid: int32(g % 2), body: body})
					if kind == asyncPuts {
						res, err = putAsyncWait(s, m)
					} else {
						res, err = s.Put(context.Background(), m)
					}
					if err == nil {
						p.mu.Lock()
						p.acked[body] = res
						p.mu.Unlock()
					}
				}
				switch {
				case err == nil:
				case errors.Is(err, ErrDiskFull):
					p.refused.Add(1)
					time.Sleep(time.Millisecond) // a client backing off
				default:
					p.other.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	return p
}

// checkAllAcked reads every acknowledged message back, by offset and
// through the queues: none may be missing.
func checkAllAcked(t *testing.T, s *Store, acked map[string]PutResult) {
	t.Helper()
	waitDispatched(t, s)
	seen := map[string]int{}
	for q := range int32(2) {
		for _, m := range readAll(t, s, "F", q) {
			seen[string(m.Body)]++
		}
	}
	for body, pr := range acked {
		m, err := s.ReadMessage(pr.PhysicalOffset)
		if err != nil || string(m.Body) != body {
			t.Fatalf("acknowledged message %.12s... at %d lost: %v", body, pr.PhysicalOffset, err)
		}
		if seen[body] != 1 {
			t.Fatalf("acknowledged message %.12s... read %d times through its queue", body, seen[body])
		}
	}
}

// fillUntilRefused runs four producers on s at full speed until the store
// refuses them for a full disk, and checks it says so without failing.
// check (if not nil) looks at the disk while writes are refused.
func fillUntilRefused(t *testing.T, s *Store, check func()) (p *producers, stop func()) {
	t.Helper()
	done := make(chan struct{})
	p = startProducers(t, s, 4, done, withBatches)
	var once sync.Once
	stop = func() {
		once.Do(func() { close(done) })
		p.wg.Wait()
	}
	t.Cleanup(stop)
	testutil.Eventually(t, 60*time.Second, func() error {
		if p.refused.Load() < 50 {
			return fmt.Errorf("%d refusals so far", p.refused.Load())
		}
		return nil
	})
	if refused, why := s.WritesRefused(); !refused || !strings.Contains(why, "disk full") {
		t.Fatalf("WritesRefused = %v %q while puts are refused", refused, why)
	}
	if s.Err() != nil {
		t.Fatalf("a full disk failed the store: %v", s.Err())
	}
	if check != nil {
		check()
	}
	return p, stop
}

// freeAndResume frees space and checks that writes resume by themselves,
// then stops the producers and checks that nothing acknowledged is lost.
// It returns how long resuming took.
func freeAndResume(t *testing.T, s *Store, p *producers, stop func(), free func()) time.Duration {
	t.Helper()
	freed := time.Now()
	free()
	testutil.Eventually(t, 5*time.Second, func() error {
		if refused, why := s.WritesRefused(); refused {
			return errors.New(why)
		}
		return nil
	})
	took := time.Since(freed)
	n := len(snapshot(p))
	testutil.Eventually(t, 20*time.Second, func() error {
		if len(snapshot(p)) < n+20 {
			return fmt.Errorf("%d acknowledged since space freed", len(snapshot(p))-n)
		}
		return nil
	})
	stop()
	if e := p.other.Load(); e != nil {
		t.Fatalf("a put failed with something other than disk full: %v", *e)
	}
	checkAllAcked(t, s, snapshot(p))
	return took
}

// A producer at full speed on a small disk: writes are refused (disk
// full) before the disk runs out, nothing acknowledged is lost, the store
// does not fail, and writes resume by themselves within seconds once
// space frees. Both flush modes.
func TestStoreDiskFullProducerAtFullSpeed(t *testing.T) {
	for _, mode := range []FlushMode{FlushAsync, FlushSync} {
		t.Run(mode.String(), func(t *testing.T) {
			const capacity = 16 << 20
			s, fs, _ := smallDisk(t, capacity, 8<<20, func(o *Options) { o.FlushMode = mode })
			p, stop := fillUntilRefused(t, s, func() {
				if n := fs.Failed(vfs.OpAllocate) + fs.Failed(vfs.OpWrite); n != 0 {
					t.Fatalf("%d calls hit ENOSPC: refusal must come first", n)
				}
				if used := fs.Used(); float64(used) > 0.95*capacity {
					t.Fatalf("%d of %d bytes used while refusing", used, capacity)
				}
			})
			refusals := p.refused.Load()
			took := freeAndResume(t, s, p, stop, func() { fs.Fill(-8 << 20) }) // someone frees space
			t.Logf("%s: %d refusals, writes resumed %v after space freed", mode, refusals, took.Round(time.Millisecond))
		})
	}
}

func snapshot(p *producers) map[string]PutResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]PutResult, len(p.acked))
	for k, v := range p.acked {
		out[k] = v
	}
	return out
}

// An ENOSPC that happens all the same (another process filled the disk
// between two checks) fails those puts cleanly: no store failure, nothing
// acknowledged lost, and writes resume once space frees. Sync mode puts
// whose records were buffered for the group commit are told they were not
// stored (their records are taken back, and the offsets reused), and so
// are puts written behind whose records were still buffered.
func TestStoreDiskFilledByAnotherProcess(t *testing.T) {
	for _, tc := range []struct {
		mode FlushMode
		kind producerKind
	}{{FlushAsync, singlePuts}, {FlushSync, singlePuts}, {FlushAsync, asyncPuts}} {
		mode := tc.mode
		name := mode.String()
		if tc.kind == asyncPuts {
			name += "/written-behind"
		}
		t.Run(name, func(t *testing.T) {
			const capacity = 64 << 20
			s, fs, _ := smallDisk(t, capacity, 0, func(o *Options) { o.FlushMode = mode; o.AsyncWrites = AsyncWritePwrite })
			stop := make(chan struct{})
			p := startProducers(t, s, 4, stop, tc.kind)
			testutil.Eventually(t, 10*time.Second, func() error {
				if len(snapshot(p)) < 500 {
					return fmt.Errorf("%d acknowledged", len(snapshot(p)))
				}
				return nil
			})
			fs.Fill(capacity) // the disk is full now, whatever the store checked
			testutil.Eventually(t, 10*time.Second, func() error {
				if p.refused.Load() < 20 {
					return fmt.Errorf("%d refusals", p.refused.Load())
				}
				return nil
			})
			if s.Err() != nil {
				t.Fatalf("ENOSPC failed the store: %v", s.Err())
			}
			fs.Fill(-capacity)
			n := len(snapshot(p))
			testutil.Eventually(t, 20*time.Second, func() error {
				if len(snapshot(p)) < n+20 {
					return fmt.Errorf("%d acknowledged since space freed", len(snapshot(p))-n)
				}
				return nil
			})
			close(stop)
			p.wg.Wait()
			if e := p.other.Load(); e != nil {
				t.Fatalf("a put failed with something other than disk full: %v", *e)
			}
			acked := snapshot(p)
			checkAllAcked(t, s, acked)
			// The queues hold exactly the acknowledged messages, offsets
			// dense: refused puts left nothing behind.
			for q := range int32(2) {
				got := readAll(t, s, "F", q)
				for i, m := range got {
					if m.QueueOffset != int64(i) {
						t.Fatalf("queue F/%d offset %d at position %d", q, m.QueueOffset, i)
					}
					if _, ok := acked[string(m.Body)]; !ok {
						t.Fatalf("queue F/%d holds %.12s..., whose put was refused", q, m.Body)
					}
				}
			}
			t.Logf("%s: %d acknowledged, %d refused, ENOSPC hits: allocate %d write %d", mode, len(acked), p.refused.Load(),
				fs.Failed(vfs.OpAllocate), fs.Failed(vfs.OpWrite))
		})
	}
}

// A put made while the disk's usage is within spaceNearMargin of the mark
// looks at the disk itself (at most every spaceNearEvery), and one made
// far from the mark does not: the puts, not only the watcher, see another
// process fill the disk.
func TestStorePutNearMarkChecksDisk(t *testing.T) {
	var usage atomic.Uint64 // math.Float64bits
	var inPut atomic.Bool
	var fromPuts atomic.Int64
	s := openTest(t, t.TempDir(), func(o *Options) {
		// One segment, allocated whole: no put allocates (which looks
		// at the disk too).
		o.SegmentSize, o.Preallocate = 16<<20, 16<<20
		o.DiskUsage = func(string) (float64, error) {
			if inPut.Load() {
				fromPuts.Add(1)
			}
			return math.Float64frombits(usage.Load()), nil
		}
	})
	put := func() error {
		inPut.Store(true)
		defer inPut.Store(false)
		_, err := s.Put(t.Context(), &record.Message{Topic: "N", BornHost: bornHost, Body: []byte("b")})
		return err
	}
	usage.Store(math.Float64bits(0.5))
	if err := put(); err != nil { // the first put makes the segment
		t.Fatal(err)
	}
	fromPuts.Store(0)
	for deadline := time.Now().Add(3 * spaceNearEvery); time.Now().Before(deadline); {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fromPuts.Load(); n != 0 {
		t.Fatalf("puts far from the mark looked at the disk %d times", n)
	}
	usage.Store(math.Float64bits(s.opts.DiskFullRatio - spaceNearMargin/2))
	s.checkSpace()
	testutil.Eventually(t, 5*time.Second, func() error {
		if err := put(); err != nil {
			return err
		}
		if fromPuts.Load() == 0 {
			return errors.New("no put near the mark looked at the disk")
		}
		return nil
	})
	usage.Store(math.Float64bits(0.99)) // another process filled the disk
	testutil.Eventually(t, 5*time.Second, func() error {
		if err := put(); !errors.Is(err, ErrDiskFull) {
			return fmt.Errorf("put near a full disk: %v", err)
		}
		return nil
	})
}

// A disk too small for the commitlog's next allocation says so: the
// refusal used to read "disk full: 0.0% used, writes refused above 90%"
// on an empty disk smaller than store.preallocate / (1 - the mark), and a
// new user could not tell why nothing was ever accepted.
func TestStoreDiskTooSmallForAllocationSaysSo(t *testing.T) {
	s, _, _ := smallDisk(t, 1<<20, 0, func(o *Options) {
		o.DiskMaxUsedRatio, o.DiskForceCleanRatio, o.DiskFullRatio = 0.1, 0.1, 0.1 // 128 KiB of 1 MiB passes 10%
	})
	refused, why := s.WritesRefused()
	if !refused || !strings.Contains(why, "next allocation of 131072 bytes (store.preallocate") || !strings.Contains(why, "past 10%") {
		t.Fatalf("refusal on a disk too small for one allocation: %v %q", refused, why)
	}
	if !strings.HasPrefix(why, "disk full: ") || strings.Count(why, "disk full") != 1 {
		t.Fatalf("refusal reason says disk full other than once: %q", why)
	}
	_, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: "x"}))
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("put: %v", err)
	}
	// The put's error says "disk full" once: it used to wrap the reason's
	// own "disk full: " prefix ("store: disk full: disk full: ..."), and a
	// client's refusal text repeated itself.
	if msg := err.Error(); !strings.HasPrefix(msg, "store: disk full: ") || strings.Count(msg, "disk full") != 1 {
		t.Fatalf("put's disk-full error: %q", msg)
	}
}
