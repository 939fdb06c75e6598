package store

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// Damage to an index file's 40-byte header (beginTs, endTs, beginPhy,
// endPhy, usedSlots, count): counts claiming more entries than the file
// holds or than it was written with, garbage counts, ranges bent out of
// shape. In an old file and in the newest, after a clean shutdown and
// after a crash, the store opens without a panic, names the file in its
// recovery report, rebuilds it from the commitlog, and every key, old and
// written after the start, is found and no query returns a wrong record.
func TestStoreIndexHeaderDamage(t *testing.T) {
	const n = 1150 // six files of 200 messages (two keys each)
	put := func(b []byte, at int, v uint64, width int) []byte {
		if width == 4 {
			be.PutUint32(b[at:], uint32(v))
		} else {
			be.PutUint64(b[at:], v)
		}
		return b
	}
	get := func(b []byte, at int) uint64 { return be.Uint64(b[at:]) }
	// quiet: damage the check cannot tell from a sound header and that
	// loses nothing (a raised end offset or end time only makes the file
	// be searched for more; a raised end offset of the newest file is
	// taken for a log that lost its tail: later records go to a new file).
	kinds := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"count of a full file", func(b []byte) []byte { return put(b, 36, 400, 4) }},
		{"count past the written entries", func(b []byte) []byte { return put(b, 36, uint64(be.Uint32(b[36:])+37), 4) }},
		{"count past the file's entries", func(b []byte) []byte { return put(b, 36, 401, 4) }},
		{"count negative", func(b []byte) []byte { return put(b, 36, math.MaxUint32, 4) }},
		{"count huge", func(b []byte) []byte { return put(b, 36, math.MaxInt32, 4) }},
		{"count zero", func(b []byte) []byte { return put(b, 36, 0, 4) }},
		{"used slots garbage", func(b []byte) []byte { return put(b, 32, 0xdeadbeef, 4) }},
		{"used slots off by one", func(b []byte) []byte { return put(b, 32, uint64(be.Uint32(b[32:])+1), 4) }},
		{"endPhy high bit", func(b []byte) []byte { return put(b, 24, get(b, 24)|1<<40, 8) }},
		{"endPhy max", func(b []byte) []byte { return put(b, 24, math.MaxInt64, 8) }},
		{"beginPhy past endPhy", func(b []byte) []byte { return put(b, 16, get(b, 24)+1, 8) }},
		{"beginPhy negative", func(b []byte) []byte { return put(b, 16, 1<<63, 8) }},
		{"endTs max", func(b []byte) []byte { return put(b, 8, math.MaxInt64, 8) }},
		{"endTs zero", func(b []byte) []byte { return put(b, 8, 0, 8) }},
		{"beginTs an hour early", func(b []byte) []byte { return put(b, 0, get(b, 0)-3_600_000, 8) }},
		{"beginTs negative", func(b []byte) []byte { return put(b, 0, 1<<63, 8) }},
		{"header garbage", func(b []byte) []byte {
			for i := range indexHeaderSize {
				b[i] = byte(0xa5 ^ i*37)
			}
			return b
		}},
		{"header zeroed", func(b []byte) []byte { clear(b[:indexHeaderSize]); return b }},
	}
	quiet := map[string]bool{"endPhy high bit": true, "endPhy max": true, "endTs max": true}
	for _, crash := range []bool{false, true} {
		golden, corpus := buildIndexCorpus(t, n, crash)
		files := indexFiles(t, golden)
		if len(files) < 4 {
			t.Fatalf("%d index files", len(files))
		}
		for _, k := range kinds {
			for _, which := range []string{"old", "newest"} {
				if k.name == "count of a full file" && which == "old" {
					continue // an old file is full already
				}
				t.Run(fmt.Sprintf("%s/%s/crash=%v", k.name, which, crash), func(t *testing.T) {
					root := t.TempDir()
					copyTree(t, golden, root)
					target := files[1]
					if which == "newest" {
						target = files[len(files)-1]
					}
					path := filepath.Join(root, "index", filepath.Base(target))
					writeFile(t, path, k.damage(readFile(t, path)))
					s := openTest(t, root, idxDamageOpts)
					waitIndexRepaired(t, s)
					named := false
					for _, c := range s.RecoveryReport().Corruptions {
						named = named || strings.Contains(c.Error(), filepath.Base(path))
					}
					if st := s.Stats(); !quiet[k.name] && !named && st.IndexFilesDamaged == 0 {
						t.Fatalf("damaged header not reported: %v", s.RecoveryReport().Err())
					}
					checkAllKeysFound(t, s, corpus)
					// Records written after the start are indexed too.
					more := putKeyed(t, s, "TN", "newkey", 250)
					waitIndexed(t, s)
					checkAllKeysFound(t, s, more)
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s2 := openTest(t, root, idxDamageOpts)
					waitIndexRepaired(t, s2)
					if st := s2.Stats(); st.IndexFilesDamaged != 0 || len(s2.RecoveryReport().Corruptions) != 0 {
						t.Fatalf("after the rebuild: %d damaged, report %v", st.IndexFilesDamaged, s2.RecoveryReport().Err())
					}
					checkAllKeysFound(t, s2, corpus)
					checkAllKeysFound(t, s2, more)
				})
			}
		}
	}
}
