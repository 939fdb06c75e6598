package store

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

func TestStoreFormatFileNames(t *testing.T) {
	if got := fileNameFor(1073741824); got != "00000000001073741824" {
		t.Fatalf("name %q", got)
	}
	for _, bad := range []string{"", "123", "0000000000000000000x", "99999999999999999999", "000000000000000000000"} {
		if _, ok := parseFileName(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
	if v, ok := parseFileName("00000000000000065536"); !ok || v != 65536 {
		t.Fatal(v, ok)
	}
	tm := time.Date(2024, 3, 5, 7, 8, 9, 123_000_000, time.Local)
	if got := formatIndexName(tm); got != "20240305070809123" {
		t.Fatalf("index name %q", got)
	}
	if back, err := parseIndexName("20240305070809123"); err != nil || !back.Equal(tm) {
		t.Fatalf("parse index name: %v %v", back, err)
	}
}

func TestStoreFormatConsumeQueueEntry(t *testing.T) {
	b := make([]byte, cqEntrySize)
	putCQEntry(b, cqEntry{phy: 0x0102030405060708, size: 0x0A0B0C0D, tags: -2})
	want := "0102030405060708" + "0a0b0c0d" + "fffffffffffffffe"
	if hex.EncodeToString(b) != want {
		t.Fatalf("entry % x", b)
	}
	putCQEntry(b, cqEntry{phy: holePhy})
	if hex.EncodeToString(b) != "ffffffffffffffff"+"00000000"+"0000000000000000" {
		t.Fatalf("hole % x", b)
	}
}

func TestStoreFormatCheckpoint(t *testing.T) {
	b := checkpoint{Physic: 1, Logics: 2, Index: 0x0102030405060708}.encode()
	want := "0000000000000001" + "0000000000000002" + "0102030405060708"
	if hex.EncodeToString(b[:24]) != want || len(b) != 28 {
		t.Fatalf("checkpoint % x", b)
	}
	if hex.EncodeToString(b[24:]) != "50797e49" {
		t.Fatalf("checkpoint crc % x", b[24:])
	}
	cp, err := decodeCheckpoint(b)
	if err != nil || cp.Index != 0x0102030405060708 {
		t.Fatal(cp, err)
	}
	b[3] ^= 1
	if _, err := decodeCheckpoint(b); err == nil {
		t.Fatal("flipped checkpoint accepted")
	}
}

// TestStoreFormatOnDisk pins the bytes the store writes: the record's
// store-assigned fields, the filler at a segment end, the consume-queue
// entry and the index header/slot/entry.
func TestStoreFormatOnDisk(t *testing.T) {
	root := t.TempDir()
	now := time.UnixMilli(1_700_000_000_000)
	s := openTest(t, root, func(o *Options) {
		o.Now = func() time.Time { return now }
		o.SegmentSize = 4096
		o.MaxMessageSize = 1024
		o.IndexSlots = 4
		o.IndexEntries = 8
	})
	m := newMsg(msgSpec{topic: "T", qid: 1, body: "hello", tags: "TagA", keys: "k1"})
	size := record.SealedSize(m)
	var last PutResult
	for range 4096 / size {
		last = mustPut(t, s, msgSpec{topic: "T", qid: 1, body: "hello", tags: "TagA", keys: "k1"})
	}
	next := mustPut(t, s, msgSpec{topic: "T", qid: 1, body: "hello", tags: "TagA", keys: "k1"})
	waitDispatched(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg0, _ := os.ReadFile(filepath.Join(root, "commitlog", "00000000000000000000"))
	if len(seg0) != 4096 {
		t.Fatalf("segment size %d", len(seg0))
	}
	end := last.PhysicalOffset + int64(size)
	if next.PhysicalOffset != 4096 || 4096-end < 8 {
		t.Fatalf("last record ends at %d, next at %d", end, next.PhysicalOffset)
	}
	filler := seg0[end : end+8]
	wantFiller := []byte{0, 0, byte((4096 - end) >> 8), byte(4096 - end), 0xCB, 0xD4, 0x31, 0x94}
	if !bytes.Equal(filler, wantFiller) {
		t.Fatalf("filler % x, want % x", filler, wantFiller)
	}
	v, err := record.Parse(seg0[last.PhysicalOffset:end], true)
	if err != nil || v.PhysicalOffset != last.PhysicalOffset || v.StoreTimestamp != 1_700_000_000_000 || v.QueueOffset != last.QueueOffset {
		t.Fatalf("record fields %+v %v", v, err)
	}
	if !bytes.Equal(v.StoreHost, []byte{127, 0, 0, 1, 0, 0, 0x2A, 0x9F}) { // 127.0.0.1:10911
		t.Fatalf("store host % x", v.StoreHost)
	}
	cq0, _ := os.ReadFile(filepath.Join(root, "consumequeue", "T", "1", "00000000000000000000"))
	e := cq0[cqEntrySize*int(last.QueueOffset):][:cqEntrySize]
	tag := record.TagsHash("TagA")
	want := make([]byte, 20)
	be.PutUint64(want, uint64(last.PhysicalOffset))
	be.PutUint32(want[8:], uint32(size))
	be.PutUint64(want[12:], uint64(tag))
	if !bytes.Equal(e, want) {
		t.Fatalf("cq entry % x, want % x", e, want)
	}
	names, _ := filepath.Glob(filepath.Join(root, "index", "*"))
	idx, _ := os.ReadFile(names[0])
	if len(idx) != 40+4*4+8*20 {
		t.Fatalf("index size %d", len(idx))
	}
	hdr := idx[:40]
	if be.Uint64(hdr[0:]) != 1_700_000_000_000 || be.Uint64(hdr[8:]) != 1_700_000_000_000 || be.Uint64(hdr[16:]) != 0 ||
		be.Uint32(hdr[36:]) != 8 {
		t.Fatalf("index header % x", hdr)
	}
	// Entry 1 is the first message's "k1" key: slot -> 1? Entries 1..7 hold
	// k1 and UNIQ-less keys of messages 0..6; entry 1 = message 0.
	e1 := idx[40+16+20 : 40+16+40]
	h := indexHash([]byte("T#k1"))
	if int32(be.Uint32(e1[0:])) != h || be.Uint64(e1[4:]) != 0 || be.Uint32(e1[12:]) != 0 || be.Uint32(e1[16:]) != 0 {
		t.Fatalf("index entry 1 % x", e1)
	}
	slot := idx[40+int(h%4)*4:][:4]
	if be.Uint32(slot) != 7 {
		t.Fatalf("slot of T#k1 = %d, want newest entry 7", be.Uint32(slot))
	}
	e7 := idx[40+16+7*20:][:20]
	if be.Uint32(e7[16:]) != 6 {
		t.Fatalf("entry 7 prev = %d", be.Uint32(e7[16:]))
	}
	cp, _ := os.ReadFile(filepath.Join(root, checkpointName))
	c, err := decodeCheckpoint(cp)
	if err != nil || c.Physic != 1_700_000_000_000 || c.Logics != 1_700_000_000_000 {
		t.Fatalf("checkpoint %+v %v", c, err)
	}
	if _, err := os.Stat(filepath.Join(root, abortName)); !os.IsNotExist(err) {
		t.Fatal("abort left after close")
	}
}
