package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/vfs"
)

// storeFDs counts the descriptors this process holds on files under root,
// by the first element of their path below it (commitlog, consumequeue,
// index, lock, ...).
func storeFDs(t testing.TB, root string) (int, map[string]int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n, kinds := 0, map[string]int{}
	for _, e := range ents {
		p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.HasPrefix(p, root+string(os.PathSeparator)) {
			continue
		}
		n++
		kinds[strings.SplitN(strings.TrimPrefix(p, root+string(os.PathSeparator)), string(os.PathSeparator), 2)[0]]++
	}
	return n, kinds
}

// putEveryQueue puts one message "<round>/<i>" to each of n queues (8
// per topic) from a few goroutines.
func putEveryQueue(t *testing.T, s *Store, n, round int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				mustPut(t, s, msgSpec{topic: fmt.Sprintf("T%d", i/8), qid: int32(i % 8), body: fmt.Sprintf("%d/%d", round, i)})
			}
		}()
	}
	wg.Wait()
}

// checkEveryQueue reads each of n queues back: the messages of rounds
// 0..rounds-1 in order.
func checkEveryQueue(t *testing.T, s *Store, n, rounds int) {
	t.Helper()
	for i := range n {
		topic := fmt.Sprintf("T%d", i/8)
		got := readAll(t, s, topic, int32(i%8))
		if len(got) != rounds {
			t.Fatalf("%s/%d: %d messages, want %d", topic, i%8, len(got), rounds)
		}
		for r, m := range got {
			if want := fmt.Sprintf("%d/%d", r, i); string(m.Body) != want {
				t.Fatalf("%s/%d offset %d: %q, want %q", topic, i%8, r, m.Body, want)
			}
		}
	}
}

// TestStoreDescriptorsBounded: a store with over a thousand written
// queues holds at most MaxOpenFiles descriptors of its files (plus the
// lock file and the calls using one at the moment), where every file used
// to keep its own; messages written before and after a file's descriptor
// was closed read back, also after a restart.
//
// 1,200 queues are ~19 consume-queue files per descriptor: every round
// evicts and reopens. The time goes to per-file work that grows with the
// queues (Close syncs every written queue's file, each through a
// reopened descriptor; Open recovers every one): with 5,000 queues the
// test took 20-60 s of the store suite under -race, ~4x this.
func TestStoreDescriptorsBounded(t *testing.T) {
	const queues = 1200
	const maxOpen = 64
	const slack = 2 + 4 // the lock and checkpoint files; files in use by the writer, dispatcher, flusher, indexer
	root := t.TempDir()
	opts := func(o *Options) { o.MaxOpenFiles = maxOpen }
	s := openTest(t, root, opts)
	bound := func(when string, s *Store) {
		t.Helper()
		n, kinds := storeFDs(t, root)
		st := s.Stats()
		t.Logf("%s: %d descriptors %v; Stats.OpenFiles %d, FileReopens %d", when, n, kinds, st.OpenFiles, st.FileReopens)
		if n > maxOpen+slack {
			t.Fatalf("%s: %d descriptors open under the store (%v), want <= %d", when, n, kinds, maxOpen+slack)
		}
	}
	putEveryQueue(t, s, queues, 0)
	waitIndexed(t, s)
	bound("after one message to each queue", s)
	putEveryQueue(t, s, queues, 1) // each queue's file was closed since: reopened
	waitIndexed(t, s)
	bound("after a second round", s)
	if st := s.Stats(); st.FileReopens == 0 {
		t.Fatalf("no file reopened: %d queues written twice with %d descriptors", queues, maxOpen)
	}
	checkEveryQueue(t, s, queues, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, kinds := storeFDs(t, root); n != 0 {
		t.Fatalf("%d descriptors left after Close: %v", n, kinds)
	}

	s = openTest(t, root, opts)
	bound("after a restart", s)
	checkEveryQueue(t, s, queues, 2)
	putEveryQueue(t, s, queues, 2)
	waitIndexed(t, s)
	bound("after a third round", s)
	checkEveryQueue(t, s, queues, 3)
}

// TestStoreReopenOutOfDescriptors: when the process has no descriptor
// left (EMFILE: its sockets took them), reopening a store file gives back
// one of the store's idle descriptors and tries again, so a sync put to a
// segment whose descriptor was closed is stored, not failed.
func TestStoreReopenOutOfDescriptors(t *testing.T) {
	s, fs := faultStore(t, t.TempDir(), func(o *Options) { o.FlushMode = FlushSync })
	for i := range 3 * minOpenFiles {
		mustPut(t, s, msgSpec{topic: fmt.Sprintf("T%d", i), body: "x"})
	}
	waitDispatched(t, s)
	seg := s.cl.list()[len(s.cl.list())-1]
	testutil.Eventually(t, 5*time.Second, func() error {
		s.fs.fds.drop(seg)
		if seg.fd.pins.Load() >= 0 {
			return errors.New("active segment's descriptor in use")
		}
		return nil
	})
	open := s.Stats().OpenFiles
	if open == 0 {
		t.Fatal("no idle descriptor to give back")
	}
	fs.Inject(vfs.Rule{Op: vfs.OpOpen, Path: "commitlog", Count: 1, Err: syscall.EMFILE})
	pr := mustPut(t, s, msgSpec{topic: "T0", body: "after EMFILE"})
	if fs.Failed(vfs.OpOpen) != 1 {
		t.Fatalf("%d opens failed, want the one injected", fs.Failed(vfs.OpOpen))
	}
	if err := s.Err(); err != nil {
		t.Fatalf("store failed: %v", err)
	}
	if m, err := s.ReadMessage(pr.PhysicalOffset); err != nil || string(m.Body) != "after EMFILE" {
		t.Fatalf("put after EMFILE reads back %v, %v", m, err)
	}
}

// TestFDCacheConcurrent: calls on many files from many goroutines through
// a cache of 4 descriptors never use a closed one (every pwrite and pread
// works and reads back its own bytes), keep at most 4 + the calls
// running open, and destroying the files leaves none.
func TestFDCacheConcurrent(t *testing.T) {
	const files, workers, rounds, maxOpen = 40, 8, 300, 4
	dir := t.TempDir()
	fsys := newFileSys(vfs.Default, maxOpen)
	ms := make([]*mappedFile, files)
	for i := range ms {
		m, err := createMappedFile(fsys, filepath.Join(dir, fileNameFor(int64(i))), 0, 64<<10, 64<<10, warmNone)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, got := make([]byte, 8), make([]byte, 8)
			for r := range rounds {
				m := ms[(w*7+r*13)%files]
				off := int64(w * 8)
				copy(buf, fmt.Sprintf("%02d%06d", w, r))
				if _, err := m.writeAt(buf, off); err != nil {
					errs <- err
					return
				}
				if _, err := m.readAt(got, off); err != nil || string(got) != string(buf) {
					errs <- fmt.Errorf("%s: read %q, %v after writing %q", m.path, got, err, buf)
					return
				}
				if r%10 == 0 {
					if err := m.sync(0); err != nil {
						errs <- err
						return
					}
				}
				if n := fsys.fds.open.Load(); n > maxOpen+workers {
					errs <- fmt.Errorf("%d descriptors open", n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n, kinds := storeFDs(t, dir); n > maxOpen {
		t.Fatalf("%d descriptors open when idle, want <= %d: %v", n, maxOpen, kinds)
	}
	for _, m := range ms {
		_ = m.destroy(true)
	}
	if n, kinds := storeFDs(t, dir); n != 0 {
		t.Fatalf("%d descriptors left after destroy: %v", n, kinds)
	}
}

// TestFDCacheReopenFindsTheSameFile: a file whose descriptor was closed is
// reopened by path only while the path still names it. Once it was
// removed and another file created at its path (a topic deleted and
// created again while a flush still held its old queue), a write through
// the old mapped file fails and the new file keeps its bytes.
func TestFDCacheReopenFindsTheSameFile(t *testing.T) {
	dir := t.TempDir()
	fsys := newFileSys(vfs.Default, minOpenFiles)
	path := filepath.Join(dir, fileNameFor(0))
	m, err := createMappedFile(fsys, path, 0, 4096, 4096, warmNone)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if _, err := m.writeAt([]byte("old"), 0); err != nil {
		t.Fatal(err)
	}
	fsys.fds.drop(m)
	if m.fd.pins.Load() >= 0 {
		t.Fatal("descriptor not closed")
	}
	if _, err := m.writeAt([]byte("ok!"), 0); err != nil || string(m.data[:3]) != "ok!" || fsys.fds.reop.Load() != 1 {
		t.Fatalf("write after the descriptor was closed: %v, %q, %d reopens", err, m.data[:3], fsys.fds.reop.Load())
	}
	fsys.fds.drop(m)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	newer := []byte(strings.Repeat("n", 4096))
	if err := os.WriteFile(path, newer, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.writeAt([]byte("OLD"), 0); !errors.Is(err, errFileReplaced) {
		t.Fatalf("write through a replaced path: %v, want errFileReplaced", err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(newer) {
		t.Fatalf("the file now at the path was written: %.8q", got)
	}
}

// BenchmarkFDCache is the cost of a pwrite of 20 bytes (one consume-queue
// entry): straight on the descriptor (direct), through the cache with the
// descriptor open (open: pin and unpin around the call), and when every
// write must reopen the file (reopen: more files written in turn than
// descriptors kept; open, fstat, and an eviction's close on top).
func BenchmarkFDCache(b *testing.B) {
	for _, tc := range []struct {
		name         string
		files, limit int
	}{{"direct", 1, minOpenFiles}, {"open", 1, minOpenFiles}, {"reopen", 2 * minOpenFiles, minOpenFiles}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			fsys := newFileSys(vfs.Default, tc.limit)
			ms := make([]*mappedFile, tc.files)
			for i := range ms {
				m, err := createMappedFile(fsys, filepath.Join(dir, fileNameFor(int64(i))), 0, 4096, 4096, warmNone)
				if err != nil {
					b.Fatal(err)
				}
				defer m.close()
				ms[i] = m
			}
			entry := make([]byte, cqEntrySize)
			r0 := fsys.fds.reop.Load()
			if tc.name == "direct" {
				f, err := ms[0].pin()
				if err != nil {
					b.Fatal(err)
				}
				defer ms[0].unpin()
				b.ResetTimer()
				for i := range b.N {
					if _, err := f.WriteAt(entry, int64(i%200)*cqEntrySize); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := ms[i%len(ms)].writeAt(entry, int64(i%200)*cqEntrySize); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fsys.fds.reop.Load()-r0)/float64(b.N), "reopens/op")
		})
	}
}

// openCounter is a file system that counts the opens of each path.
type openCounter struct {
	vfs.FS
	mu    sync.Mutex
	opens map[string]int
}

func (c *openCounter) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	return c.FS.OpenFile(name, flag, perm)
}

// countDone counts the puts answered (a PutDone).
type countDone struct {
	mu   sync.Mutex
	n    int
	errs []error
}

func (c *countDone) PutDone(_ PutResult, err error) {
	c.mu.Lock()
	c.n++
	if err != nil {
		c.errs = append(c.errs, err)
	}
	c.mu.Unlock()
}

// TestStoreActiveSegmentKeptOpen: with far more busy files than
// descriptors (batches of puts to 64 different queues of 512, the way
// the broker puts them, through 8 descriptors), the active commitlog
// segment keeps its descriptor: it is opened a few times at most
// (created, made active, synced after a roll), where the clock closed it
// while the dispatcher reopened a batch's consume-queue files and the
// next batch's write reopened it (about once a batch). The consume-queue
// files still take turns within the bound (how often depends on how the
// dispatcher's rounds fall: only logged).
func TestStoreActiveSegmentKeptOpen(t *testing.T) {
	const queues, batch, batches = 512, 64, 64
	root := t.TempDir()
	fs := &openCounter{FS: vfs.Default, opens: map[string]int{}}
	s := openTest(t, root, func(o *Options) {
		o.FS = fs
		o.SegmentSize = 1 << 20
		o.AsyncWrites = AsyncWritePwrite
	})
	r0 := s.Stats().FileReopens
	done := &countDone{}
	for b := range batches {
		for i := range batch {
			q := (b*batch + i) % queues
			m := newMsg(msgSpec{topic: fmt.Sprintf("T%d", q/8), qid: int32(q % 8), body: fmt.Sprintf("%d/%d", b*batch/queues, q)})
			if _, pending, err := s.PutAsyncDeferred(m, false, done); err != nil {
				t.Fatal(err)
			} else if !pending {
				done.PutDone(PutResult{}, nil)
			}
		}
		s.Drain()
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		s.Drain()
		done.mu.Lock()
		defer done.mu.Unlock()
		if len(done.errs) > 0 {
			t.Fatalf("puts failed: %v", done.errs)
		}
		if done.n != batch*batches {
			return fmt.Errorf("%d of %d puts answered", done.n, batch*batches)
		}
		return nil
	})
	waitIndexed(t, s)
	checkEveryQueue(t, s, queues, batch*batches/queues)
	st := s.Stats()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	segs, segOpens, cqOpens := 0, 0, 0
	for p, n := range fs.opens {
		switch {
		case strings.Contains(p, string(os.PathSeparator)+"commitlog"+string(os.PathSeparator)):
			segs++
			segOpens += n
		case strings.Contains(p, string(os.PathSeparator)+"consumequeue"+string(os.PathSeparator)):
			cqOpens += n
		}
	}
	t.Logf("%d puts in %d batches: %d commitlog segments opened %d times, consume-queue files %d times; %d reopens, %d open",
		batch*batches, batches, segs, segOpens, cqOpens, st.FileReopens-r0, st.OpenFiles)
	if segs == 0 || segOpens > 3*segs {
		t.Fatalf("%d commitlog segments opened %d times in %d batches of puts, want <= 3 each", segs, segOpens, batches)
	}
	if n, kinds := storeFDs(t, root); n > minOpenFiles+5 {
		t.Fatalf("%d descriptors open under the store (%v), want <= %d", n, kinds, minOpenFiles+5)
	}
}
