package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// Index files large enough to have whole pages of slots and of entries:
// slots [40, 8232), entries [8232, 16232); two keys per message (KEYS and
// UNIQ_KEY), so 200 messages per file.
func idxDamageOpts(o *Options) {
	o.IndexSlots = 2048
	o.IndexEntries = 400
	o.IndexFlushInterval = 20 * time.Millisecond
}

// buildIndexCorpus stores n messages with keys; with crash, the returned
// root is the image of the live store once its index was synced (what a
// kill -9 leaves), else the store closed cleanly.
func buildIndexCorpus(t *testing.T, n int, crash bool) (string, []corpusMsg) {
	t.Helper()
	root := t.TempDir()
	s := openTest(t, root, idxDamageOpts)
	var out []corpusMsg
	rng := rand.New(rand.NewPCG(uint64(n), 7)) // keys whose hashes collide in the slots now and then
	for i := range n {
		sp := msgSpec{topic: fmt.Sprintf("T%d", i%2), qid: int32(i % 3), body: fmt.Sprintf("%d:%s", i, strings.Repeat("z", i%50)),
			keys: fmt.Sprintf("key%d-%x", i, rng.Uint32()), uniq: fmt.Sprintf("U%05d-%x", i, rng.Uint64())}
		out = append(out, corpusMsg{mustPut(t, s, sp), sp})
	}
	waitIndexed(t, s)
	if !crash {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return root, out
	}
	last := out[len(out)-1].pr.StoreTimestamp
	testutil.Eventually(t, 5*time.Second, func() error {
		if cp := s.lastCheckpoint(); cp.Index < last {
			return fmt.Errorf("index synced to %d, last record %d", cp.Index, last)
		}
		return nil
	})
	image := t.TempDir()
	copyTree(t, root, image)
	if _, err := os.Stat(filepath.Join(image, "abort")); err != nil {
		t.Fatalf("image of a live store has no abort marker: %v", err)
	}
	return image, out
}

func indexFiles(t *testing.T, root string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "index", "?????????????????"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkAllKeysFound queries every message by its key and its unique key:
// each must be found, and nothing else returned.
func checkAllKeysFound(t *testing.T, s *Store, corpus []corpusMsg) {
	t.Helper()
	missing := 0
	for _, c := range corpus {
		for _, k := range []string{c.spec.keys, c.spec.uniq} {
			r, err := s.QueryByKey(c.spec.topic, k, 4, 0, 1<<62)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for i, b := range r.Buffers {
				m, _, err := record.Decode(b, true)
				if err != nil || !hasKey([]byte(m.Properties), k) {
					t.Fatalf("query %s/%s returned a wrong record at %d", c.spec.topic, k, r.PhysicalOffsets[i])
				}
				found = found || r.PhysicalOffsets[i] == c.pr.PhysicalOffset
			}
			r.Release()
			if !found {
				if missing++; missing <= 3 {
					t.Errorf("%s/%s (at %d) not found by key", c.spec.topic, k, c.pr.PhysicalOffset)
				}
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d keys not found", missing, 2*len(corpus))
	}
}

func waitIndexRepaired(t *testing.T, s *Store) {
	t.Helper()
	select {
	case <-s.idxRepaired:
	case <-time.After(30 * time.Second):
		t.Fatal("index repair did not finish")
	}
}

// Each kind of damage inside an index file (a torn write, a bad disk),
// in an old file and in the newest, after a clean shutdown and after a
// crash: found, reported, rebuilt from the commitlog; every key is found
// again and no query returns a wrong record. It used to stay silently
// damaged: the keys it lost were never found again.
func TestStoreIndexDamageRebuilt(t *testing.T) {
	const n = 1150 // 5 full index files, the newest with 305 entries
	kinds := []struct {
		name   string
		damage func(t *testing.T, b []byte) []byte
	}{
		{"flipped slot", func(t *testing.T, b []byte) []byte {
			for p := indexHeaderSize; p < 8232; p += indexSlotSize {
				if be.Uint32(b[p:]) != 0 {
					b[p+3] ^= 0x01
					return b
				}
			}
			t.Fatal("no slot in use")
			return nil
		}},
		{"flipped entry hash", func(t *testing.T, b []byte) []byte {
			b[8232+indexEntrySize*7+3] ^= 0x10
			return b
		}},
		{"flipped entry link", func(t *testing.T, b []byte) []byte {
			for e := 8232 + indexEntrySize; e+indexEntrySize <= len(b); e += indexEntrySize {
				if be.Uint32(b[e+16:]) != 0 {
					b[e+19] ^= 0x02
					return b
				}
			}
			t.Fatal("no linked entry")
			return nil
		}},
		{"zeroed slot page", func(t *testing.T, b []byte) []byte {
			clear(b[4096:8192])
			return b
		}},
		{"zeroed entry page", func(t *testing.T, b []byte) []byte {
			clear(b[12288:16232])
			return b
		}},
		{"truncated", func(t *testing.T, b []byte) []byte {
			return b[:9000]
		}},
		{"truncated to nothing", func(t *testing.T, b []byte) []byte {
			return b[:0]
		}},
	}
	for _, crash := range []bool{false, true} {
		golden, corpus := buildIndexCorpus(t, n, crash)
		files := indexFiles(t, golden)
		if len(files) < 4 {
			t.Fatalf("%d index files", len(files))
		}
		for _, k := range kinds {
			for _, which := range []string{"old", "newest"} {
				name := fmt.Sprintf("%s/%s/crash=%v", k.name, which, crash)
				t.Run(name, func(t *testing.T) {
					root := t.TempDir()
					copyTree(t, golden, root)
					target := files[1]
					if which == "newest" {
						target = files[len(files)-1]
					}
					path := filepath.Join(root, "index", filepath.Base(target))
					writeFile(t, path, k.damage(t, readFile(t, path)))
					s := openTest(t, root, idxDamageOpts)
					waitIndexRepaired(t, s)
					checkAllKeysFound(t, s, corpus)
					if st := s.Stats(); st.IndexFilesDamaged != 1 {
						t.Fatalf("%d index files reported damaged", st.IndexFilesDamaged)
					}
					// The damaged file was rebuilt in its place (or, when
					// even its range was lost, removed and walked again).
					if got := indexFiles(t, root); len(got) < len(files) {
						t.Fatalf("%d index files, had %d", len(got), len(files))
					}
					if _, err := os.Stat(path + indexRebuildSuffix); !os.IsNotExist(err) {
						t.Fatalf("rebuild file left: %v", err)
					}
					// The rebuilt files pass the check at the next start.
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s2 := openTest(t, root, idxDamageOpts)
					waitIndexRepaired(t, s2)
					if st := s2.Stats(); st.IndexFilesDamaged != 0 || len(s2.RecoveryReport().Corruptions) != 0 {
						t.Fatalf("after the rebuild: %d damaged, report %v", st.IndexFilesDamaged, s2.RecoveryReport().Err())
					}
					checkAllKeysFound(t, s2, corpus)
				})
			}
		}
	}
}

// fuzzIndexFile is an index file of 8 slots and 16 entries over b (the
// size of such a file: cut or padded with zeros), as load reads it.
func fuzzIndexFile(b []byte) *indexFile {
	data := make([]byte, indexFileSize(8, 16))
	copy(data, b)
	f := &indexFile{mf: &mappedFile{data: data}, slots: 8, entries: 16}
	f.readHeader()
	return f
}

// FuzzStoreIndexFile: the index file check never panics, and a file it
// accepts finds each of its entries through the slot of the entry's own
// hash: nothing an accepted file holds is lost to a query. Seeds: files
// the indexer wrote, and damaged copies of them.
func FuzzStoreIndexFile(f *testing.F) {
	seed := func(keys int) []byte {
		nf := &indexFile{mf: &mappedFile{data: make([]byte, indexFileSize(8, 16))}, slots: 8, entries: 16, count: 1}
		_ = nf.openHead(true)
		for i := range keys {
			nf.pend = nf.pend[:0] // entries written to data below
			_ = nf.addLocked(indexHash(fmt.Appendf(nil, "T#k%d", i%5)), int64(100+i*10), int64(1_700_000_000_000+i*1000))
			copy(nf.mf.data[nf.entryPos(int32(i+1)):], nf.pend)
		}
		copy(nf.mf.data, nf.head)
		return nf.mf.data
	}
	for _, k := range []int{0, 1, 7, 15} {
		b := seed(k)
		f.Add(b)
		d := append([]byte(nil), b...)
		d[len(d)/2] ^= 0x40
		f.Add(d)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ix := fuzzIndexFile(b)
		if ix.checkHeader() != "" || ix.verifyLocked() != "" {
			// Queries of a damaged file (until it is rebuilt) stay in bounds.
			ix.count = min(max(ix.count, 1), int32(ix.entries))
			ix.lookup(int32(len(b)), 0, 1<<62, func(int64) bool { return true })
			return
		}
		for n := int32(1); n < ix.count; n++ {
			e := ix.entryLocked(n)
			h, phy := int32(be.Uint32(e[0:])), int64(be.Uint64(e[4:]))
			found := false
			ix.lookup(h, math.MinInt64, math.MaxInt64, func(p int64) bool {
				found = found || p == phy
				return true
			})
			if !found {
				t.Fatalf("accepted file: entry %d (hash %d, phy %d) not found through its slot", n, h, phy)
			}
		}
	})
}

// After the log's tail is cut (a slave truncating to its new master's
// log), the records written at the cut are indexed: their keys are found,
// also after a restart, and the index files pass the check. They used to
// be skipped until the log grew past the last record indexed before the
// cut.
// putKeyed stores n messages on topic, each with key keyPrefix<i>, body
// new<i> and unique key NU<i>, for checkAllKeysFound.
func putKeyed(t *testing.T, s *Store, topic, keyPrefix string, n int) []corpusMsg {
	t.Helper()
	var out []corpusMsg
	for i := range n {
		sp := msgSpec{topic: topic, body: fmt.Sprint("new", i), keys: fmt.Sprint(keyPrefix, i), uniq: fmt.Sprint("NU", i)}
		out = append(out, corpusMsg{mustPut(t, s, sp), sp})
	}
	return out
}

func TestStoreIndexAfterTruncateTail(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, idxDamageOpts)
	first := putN(t, s, 100, "a")
	waitIndexed(t, s)
	cut := first[40].PhysicalOffset
	if err := s.TruncateTail(cut); err != nil {
		t.Fatal(err)
	}
	more := putKeyed(t, s, "TA", "new", 30)
	waitIndexed(t, s)
	checkAllKeysFound(t, s, more)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, idxDamageOpts)
	waitIndexRepaired(t, s)
	if st := s.Stats(); st.IndexFilesDamaged != 0 {
		t.Fatalf("%d index files damaged after the cut", st.IndexFilesDamaged)
	}
	checkAllKeysFound(t, s, more)
}

// A damaged index file whose records the commitlog no longer holds (its
// first segment is gone) is dropped, not rebuilt; the keys of the records
// still stored are all found.
func TestStoreIndexDamageBelowLogDropped(t *testing.T) {
	root, corpus := buildIndexCorpus(t, 1150, false)
	files := indexFiles(t, root)
	segs := segmentFiles(t, root)
	sort.Strings(segs)
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	b := readFile(t, files[0])
	clear(b[4096:8192])
	writeFile(t, files[0], b)
	s := openTest(t, root, idxDamageOpts)
	waitIndexRepaired(t, s)
	clMin := s.cl.minOffset()
	if clMin == 0 {
		t.Fatal("the first segment is still there")
	}
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Fatalf("damaged index file of removed records still there: %v", err)
	}
	if st := s.Stats(); st.IndexFilesDamaged != 1 || st.IndexFilesRebuilt != 0 {
		t.Fatalf("damaged %d, rebuilt %d", st.IndexFilesDamaged, st.IndexFilesRebuilt)
	}
	var kept []corpusMsg
	for _, c := range corpus {
		if c.pr.PhysicalOffset >= clMin {
			kept = append(kept, c)
		}
	}
	checkAllKeysFound(t, s, kept)
}

// Index files written with other index sizes (the options changed) are
// not taken for damaged ones: the commitlog is indexed again at start,
// into files of the new size, and every key is found.
func TestStoreIndexSizeChanged(t *testing.T) {
	root, corpus := buildIndexCorpus(t, 1150, false)
	s := openTest(t, root, func(o *Options) { idxDamageOpts(o); o.IndexEntries = 300 })
	waitIndexRepaired(t, s)
	if st := s.Stats(); st.IndexFilesDamaged != 0 {
		t.Fatalf("%d index files reported damaged", st.IndexFilesDamaged)
	}
	checkAllKeysFound(t, s, corpus)
}
