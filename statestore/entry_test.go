package statestore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1696374425000)

func prepare(t testing.TB, e *Engine, now time.Time, r *Request) []byte {
	t.Helper()
	entry, out, needsLog := e.Prepare(r, now)
	if !needsLog {
		t.Fatalf("Prepare(%q) answered %q without the log", r.Payload, out.Reply.Payload)
	}
	return entry
}

func cmd(args ...string) []byte {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return AppendRequest(nil, b...)
}

// The log entry format of doc.go, pinned byte for byte (the expected bytes
// and their CRC32-C were computed outside Go, field by field).
func TestStateStoreEntryBytesPinned(t *testing.T) {
	e := mustEngine(t, Options{})
	r := &Request{Payload: cmd("SET", "k", "v", "NX", "PX", "1500"), DedupKey: DedupKey([]byte("A"), "rt"), DedupTTL: 10 * time.Second}
	r.SetUserProperty("__ts", "1696374425000:0:Client1")
	r.SetUserProperty("__ft", "1696374425000:0:Client1")
	got := prepare(t, e, t0, r)
	want := "53" + "01" + "01" + "1d" + // magic, format, SET, NX|PX|FT|DEDUP
		"0000018af7cb85a8" + "0000000000000001" + "0a" + hex.EncodeToString([]byte("StateStore")) + // version
		"00000000000005dc" + // PX 1500
		"0000018af7cb85a8" + "0000000000000000" + "07" + hex.EncodeToString([]byte("Client1")) + // ft
		"00000001" + "6b" + "00000001" + "76" + // key, value
		"00000011" + "01" + "77468b60861a3cb3ce008aa4e31ebcf7" + "0000000000002710" + // dedup id (SHA-256 of 0000000141000000027274), ttl 10000 ms
		"77212b86" // CRC32-C
	if hex.EncodeToString(got) != want {
		t.Errorf("SET entry\n got %x\nwant %s", got, want)
	}
	// The same entry as builds before dedup ids wrote it, the dedup key
	// itself in DEDUP, applies alike, and a redelivery of its request
	// gets the reply it cached.
	old := strings.Replace(want, "00000011"+"01"+"77468b60861a3cb3ce008aa4e31ebcf7", "0000000b"+"0000000141000000027274", 1)
	old = old[:len(old)-8] + "ed297343"
	oldEntry, _ := hex.DecodeString(old)
	e2 := mustEngine(t, Options{})
	if out := apply(t, e2, oldEntry, t0); string(out.Reply.Payload) != "+OK\r\n" {
		t.Fatalf("old entry applied: %q", out.Reply.Payload)
	}
	if _, out, needsLog := e2.Prepare(r, t0); needsLog || string(out.Reply.Payload) != "+OK\r\n" || out.Reply.Version.Counter != 1 {
		t.Errorf("redelivery after an old entry: %q %v %v", out.Reply.Payload, out.Reply.Version, needsLog)
	}
	le, err := decodeEntry(got, "", true)
	if err != nil || le.op != opSet || le.cond != CondNX || le.expiryMs != 1500 || le.ft.Node != "Client1" || le.dedupTTL != 10000 ||
		le.version != (HLC{1696374425000, 1, "StateStore"}) || string(le.key) != "k" || string(le.value) != "v" {
		t.Errorf("decode: %+v, %v", le, err)
	}

	del := prepare(t, e, t0, &Request{Payload: cmd("DEL", "k2")})
	if got, want := hex.EncodeToString(del), "530102000000018af7cb85a800000000000000020a537461746553746f7265000000026b3298b7f2e9"; got != want {
		t.Errorf("DEL entry\n got %s\nwant %s", got, want)
	}
}

// Every truncation, every single-bit flip and every wrong field of an
// entry is ErrCorrupt (or ErrUnsupportedFormat): Apply refuses it and
// changes nothing.
func TestStateStoreEntryCorruption(t *testing.T) {
	e := mustEngine(t, Options{})
	r := &Request{Payload: cmd("SET", "k", "v", "NEX", "PX", "10"), DedupKey: []byte("d"), DedupTTL: time.Second}
	r.SetUserProperty("__ts", "1:0:c")
	r.SetUserProperty("__ft", "1:0:c")
	good := prepare(t, e, t0, r)
	var before, after []byte
	before = snapshotBytes(t, e)
	for i := 0; i < len(good); i++ {
		if _, err := e.Apply(good[:i], t0); !isCorrupt(err) {
			t.Fatalf("prefix %d: %v", i, err)
		}
		for bit := 0; bit < 8; bit++ {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			if _, err := e.Apply(b, t0); !isCorrupt(err) {
				t.Fatalf("flip byte %d bit %d: %v", i, bit, err)
			}
		}
	}
	if _, err := e.Apply(append(append([]byte(nil), good...), 0), t0); !isCorrupt(err) {
		t.Errorf("trailing byte: %v", err)
	}
	after = snapshotBytes(t, e)
	if string(before) != string(after) {
		t.Error("a refused entry changed the engine")
	}
	// Well-checksummed but inconsistent entries.
	bad := []logEntry{
		{op: 9, version: HLC{1, 0, "n"}, key: []byte("k")},
		{op: opDel, version: HLC{1, 0, "n"}},                                // no key
		{op: opDel, version: HLC{1, 0, "n"}, key: []byte("k"), expiryMs: 5}, // PX on DEL
		{op: opVDel, version: HLC{1, 0, "n"}, key: []byte("k"), cond: CondNX},
		{op: opSet, version: HLC{1, 0, "a:b"}, key: []byte("k")}, // ':' in node
		{op: opSet, version: HLC{}, key: []byte("k")},            // no node
		{op: opSet, version: HLC{-1, 0, "n"}, key: []byte("k")},
		{op: opExpire, version: HLC{1, 0, "n"}, ft: HLC{1, 0, "n"}},
		{op: opSet, version: HLC{1, 0, "n"}, key: []byte("k"), dedup: []byte("d"), dedupTTL: 0},
	}
	for i, le := range bad {
		b := le.appendTo(nil)
		if _, err := decodeEntry(b, "", true); !isCorrupt(err) {
			t.Errorf("bad entry %d decoded: %v", i, err)
		}
	}
	// A PX that is not positive: patch the 8 bytes after the version.
	px := (&logEntry{op: opSet, version: HLC{1, 0, "n"}, key: []byte("k"), expiryMs: 5}).appendTo(nil)
	for _, v := range []uint64{0, 1 << 63} {
		binary.BigEndian.PutUint64(px[4+hlcSize(HLC{Node: "n"}):], v)
		if _, err := decodeEntry(resum(px), "", true); !isCorrupt(err) {
			t.Errorf("PX %d decoded: %v", int64(v), err)
		}
	}
	b := append([]byte(nil), good...)
	b[1] = 2
	if _, err := decodeEntry(resum(b), "n", true); !errors.Is(err, ErrUnsupportedFormat) {
		t.Errorf("format 2: %v", err)
	}
}

// resum rewrites the trailing CRC of an entry after a deliberate change.
func resum(b []byte) []byte {
	n := len(b) - 4
	binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

// isCorrupt reports whether err is a decoding error.
func isCorrupt(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedFormat)
}

// ApplyOwn (an entry that never left memory) applies what Apply applies:
// the same replies and versions over a scripted log, and equal
// snapshots. It skips only the entry's checksum: an entry whose checksum
// is wrong applies, one whose fields are malformed still fails with
// ErrCorrupt and changes nothing.
func TestStateStoreEngineApplyOwn(t *testing.T) {
	applyLogTwice(t, scriptedLog(t, 400, 7), (*Engine).ApplyOwn)

	e := mustEngine(t, Options{})
	r := &Request{Payload: cmd("SET", "k", "v")}
	r.SetUserProperty(PropTimestamp, "1696374425000:0:c")
	entry := prepare(t, e, t0, r)
	damaged := bytes.Clone(entry)
	damaged[len(damaged)-1] ^= 0xff // the checksum only
	if _, err := e.Apply(damaged, t0); !isCorrupt(err) {
		t.Fatalf("Apply of a bad checksum: %v", err)
	}
	if out, err := e.ApplyOwn(damaged, t0); err != nil || string(out.Reply.Payload) != "+OK\r\n" {
		t.Fatalf("ApplyOwn of a bad checksum: %q %v", out.Reply.Payload, err)
	}
	before := snapshotBytes(t, e)
	bad := bytes.Clone(entry)
	bad[2] = 99 // no such op
	if _, err := e.ApplyOwn(bad, t0); !isCorrupt(err) {
		t.Fatalf("ApplyOwn of a bad op: %v", err)
	}
	if _, err := e.ApplyOwn(entry[:len(entry)-6], t0); !isCorrupt(err) {
		t.Fatalf("ApplyOwn of a cut entry: %v", err)
	}
	if !bytes.Equal(before, snapshotBytes(t, e)) {
		t.Fatal("a refused entry changed the engine")
	}
}
