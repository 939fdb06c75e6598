package store

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/store/record"
)

// Index repair. Recovery (indexService.load) checks the newest index file
// and queues the damaged files it finds; once the store serves, the
// "index-repair" goroutine checks every older file (verifyLocked: they
// are no longer written, so this needs no lock against the indexer) and
// rebuilds each damaged one from the commitlog: the records of the range
// the file covered are indexed again into <name>.rebuild, which is synced
// and renamed over the damaged file, then takes its place in the list (its
// position, so the order of files by name and range is kept). Until then
// the damaged file keeps answering queries with what it still finds
// (every result is checked against its key). A range the commitlog no
// longer holds (retention) drops the file instead. A rebuild interrupted
// by a shutdown or a crash leaves the damaged file, found and rebuilt
// again at the next start; the leftover .rebuild file is removed then.
const indexRebuildSuffix = ".rebuild"

// repairIndex is the index-repair goroutine: it runs once after recovery.
func (s *Store) repairIndex() {
	defer close(s.idxRepaired)
	x := s.idx
	todo := x.repairs
	x.repairs = nil
	for _, f := range x.list() {
		if s.stopping() {
			return
		}
		if slices.ContainsFunc(todo, func(r indexRepair) bool { return r.f == f }) || !f.mf.acquire() {
			continue
		}
		f.mu.RLock()
		why := ""
		if f.head == nil && f.count > 1 { // the newest was checked by load, or is new
			why = f.verifyLocked()
		}
		f.mu.RUnlock()
		f.mf.release()
		if why != "" {
			s.stats.indexDamaged.Add(1)
			ce := &CorruptError{File: f.mf.path, Reason: why + "; rebuilt from the commitlog"}
			s.log.Error("store: corruption found", "file", ce.File, "reason", ce.Reason)
			s.emit(Event{Kind: EventCorruption, File: ce.File, Err: ce})
			todo = append(todo, repairOf(f, why))
		}
	}
	for _, r := range todo {
		if s.stopping() {
			return
		}
		if err := s.rebuildIndexFile(r); err != nil {
			s.log.Error("store: index file not rebuilt; keys of its records may not be found by key until the next start",
				"file", r.f.mf.path, "err", err)
		}
	}
}

func (s *Store) stopping() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// rebuildIndexFile indexes the records with r.after < phy < r.before
// again into a new file that replaces r.f.
func (s *Store) rebuildIndexFile(r indexRepair) error {
	x := s.idx
	path := r.f.mf.path
	clMin := s.cl.minOffset()
	end := s.indexed.Load() // later records are the indexer's
	from := max(r.from, clMin)
	if r.to < clMin || from >= end {
		s.log.Warn("store: damaged index file dropped: the commitlog no longer holds the records it covered", "file", path)
		x.drop(r.f)
		return nil
	}
	tmp := path + indexRebuildSuffix
	size := indexFileSize(s.opts.IndexSlots, s.opts.IndexEntries)
	fh, err := s.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", tmp, err)
	}
	if err := fh.Truncate(size); err != nil {
		_ = fh.Close()
		_ = s.fs.Remove(tmp)
		return fmt.Errorf("store: size %s: %w", tmp, err)
	}
	if err := reserveIndexHead(fh, tmp, s.opts.IndexSlots); err != nil {
		_ = fh.Close()
		_ = s.fs.Remove(tmp)
		return err
	}
	mf, err := mapFile(s.fs, fh, tmp, 0, size)
	if err != nil {
		_ = s.fs.Remove(tmp)
		return err
	}
	mf.adviseRandom()
	nf := &indexFile{mf: mf, slots: s.opts.IndexSlots, entries: s.opts.IndexEntries, count: 1}
	_ = nf.openHead(true)
	nf.mu.Lock()
	defer nf.mu.Unlock()
	nf.writeHeaderLocked()
	var (
		c       segCursor
		keyBuf  []byte
		werr    error
		records int
		lastPhy = int64(-1)
		lastTs  int64
	)
	prev := x.before(r.f)
	prevEnd := int64(-1)
	if prev != nil && prev.mf.acquire() {
		defer prev.mf.release()
		prev.mu.RLock()
		prevEnd = prev.endPhy
		prev.mu.RUnlock()
	}
	pos := from
	c.walk(s.cl, &pos, end, func(v *record.View, phy int64, _ int32) bool {
		if phy < r.from {
			return true
		}
		if phy > r.to || werr != nil {
			return false
		}
		if records++; records%4096 == 0 && s.stopping() {
			werr = ErrClosed
			return false
		}
		lastPhy, lastTs = phy, v.StoreTimestamp
		e := s.indexEntryOf(v)
		if e.sysFlag&record.TxMask == record.TxRollback {
			return true
		}
		forEachIndexKey(&e, func(k []byte) {
			if werr != nil || nf.full() {
				return
			}
			keyBuf = append(append(append(keyBuf[:0], e.topic...), '#'), k...)
			h := indexHash(keyBuf)
			if phy <= prevEnd && prev.has(h, phy) {
				return // the record's first keys went to the file before
			}
			werr = nf.addLocked(h, phy, e.ts)
		})
		return true
	}, nil)
	c.releaseCur()
	if werr == nil && nf.count > 1 && lastPhy > nf.endPhy {
		nf.endPhy, nf.endTs = lastPhy, max(nf.endTs, lastTs)
		nf.writeHeaderLocked()
	}
	if werr == nil {
		werr = nf.retireLocked()
	}
	if werr == nil {
		werr = mf.sync(int64(nf.count))
	}
	if werr != nil {
		_ = mf.destroy(true)
		return werr
	}
	if !x.replaceWith(r.f, nf, path) {
		_ = mf.destroy(true) // retention removed the damaged file meanwhile
		return nil
	}
	s.stats.indexRebuilt.Add(1)
	s.log.Warn("store: damaged index file rebuilt from the commitlog", "file", path, "entries", nf.count-1, "damage", r.why)
	return nil
}

// replaceWith renames nf's file over old's path and puts nf in old's place
// in the list; false (and nothing done) if old is no longer listed.
func (x *indexService) replaceWith(old, nf *indexFile, path string) bool {
	x.listMu.Lock()
	defer x.listMu.Unlock()
	l := x.list()
	i := slices.Index(l, old)
	if i < 0 {
		return false
	}
	if err := x.s.fs.Rename(nf.mf.path, path); err != nil {
		x.s.log.Error("store: index file not rebuilt", "file", path, "err", err)
		return false
	}
	_ = fsutil.SyncDir(x.dir)
	nf.mf.path = path
	nl := slices.Clone(l)
	nl[i] = nf
	x.files.Store(&nl)
	old.mf.close() // unmapped once the queries reading it are done
	return true
}

// before returns the file listed before f, or nil.
func (x *indexService) before(f *indexFile) *indexFile {
	l := x.list()
	if i := slices.Index(l, f); i > 0 {
		return l[i-1]
	}
	return nil
}

// has reports whether f holds an entry for hash pointing at phy.
func (f *indexFile) has(hash int32, phy int64) bool {
	found := false
	f.lookup(hash, math.MinInt64, math.MaxInt64, func(p int64) bool {
		found = p == phy
		return !found
	})
	return found
}

// drop removes old from the list and deletes its file.
func (x *indexService) drop(old *indexFile) {
	x.listMu.Lock()
	defer x.listMu.Unlock()
	l := x.list()
	if i := slices.Index(l, old); i >= 0 {
		nl := slices.Delete(slices.Clone(l), i, i+1)
		x.files.Store(&nl)
		_ = old.mf.destroy(true)
	}
}

// forEachIndexKey calls fn with each key a record is indexed under: each
// of its KEYS (space separated), then its UNIQ_KEY (empty ones skipped).
func forEachIndexKey(e *dispEntry, fn func(k []byte)) {
	for keys := e.keys; len(keys) > 0; {
		i := bytes.IndexByte(keys, ' ')
		k := keys
		if i >= 0 {
			k, keys = keys[:i], keys[i+1:]
		} else {
			keys = nil
		}
		if len(k) > 0 {
			fn(k)
		}
	}
	if len(e.uniq) > 0 {
		fn(e.uniq)
	}
}
