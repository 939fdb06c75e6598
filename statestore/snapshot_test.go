package statestore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func snapshotBytes(t testing.TB, e *Engine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := e.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func apply(t testing.TB, e *Engine, entry []byte, at time.Time) Outcome {
	t.Helper()
	out, err := e.Apply(entry, at)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The snapshot format of doc.go, pinned byte for byte (the expected bytes
// and their CRC32-C were computed outside Go, field by field).
func TestStateStoreSnapshotBytesPinned(t *testing.T) {
	e := mustEngine(t, Options{})
	r := &Request{Payload: cmd("SET", "a", "1"), DedupKey: DedupKey([]byte("A"), "rt"), DedupTTL: 10 * time.Second}
	r.SetUserProperty("__ts", "1696374425000:0:c")
	r.SetUserProperty("__ft", "1696374425000:0:c")
	apply(t, e, prepare(t, e, t0, r), t0)
	r = &Request{Payload: cmd("SET", "b", "2", "PX", "1000")}
	r.SetUserProperty("__ts", "1696374425000:0:c")
	apply(t, e, prepare(t, e, t0, r), t0)
	r = &Request{Payload: cmd("DEL", "a")}
	r.SetUserProperty("__ft", "1696374425000:0:c")
	apply(t, e, prepare(t, e, t0, r), t0)

	S := hex.EncodeToString([]byte("StateStore"))
	v := func(c string) string { return "0000018af7cb85a8" + "00000000000000" + c + "0a" + S }
	zero := "0000000000000000" + "0000000000000000" + "00"
	want := hex.EncodeToString([]byte("SGSTATE\x00")) + "00000001" +
		v("03") + zero + // APPLIED, HISTFLOOR
		"0000000000000001" + "0000000162" + "0000000132" + v("02") + "0000018af7cb8990" + zero + // key b, expires T+1000, no token
		"0000000000000003" +
		v("01") + "01" + "0000000161" + "0000000131" + // SET a 1
		v("02") + "01" + "0000000162" + "0000000132" + // SET b 2
		v("03") + "02" + "0000000161" + // DELETE a
		"0000000000000001" + "00000011" + "01" + "77468b60861a3cb3ce008aa4e31ebcf7" + "0000018af7cbacb8" + v("01") + "00000005" + hex.EncodeToString([]byte("+OK\r\n")) +
		"e2075e34"
	got := snapshotBytes(t, e)
	if hex.EncodeToString(got) != want {
		t.Fatalf("snapshot\n got %x\nwant %s", got, want)
	}
	// Restore reads it back to the same state.
	e2 := mustEngine(t, Options{})
	if err := e2.Restore(bytes.NewReader(got)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, e2), got) {
		t.Error("restore + snapshot differs")
	}
	if v, ver, ok := e2.Get([]byte("b"), t0); !ok || string(v) != "2" || ver.Counter != 2 {
		t.Errorf("restored b = %q %v %v", v, ver, ok)
	}
	if when, ok := e2.NextExpiry(); !ok || !when.Equal(t0.Add(time.Second)) {
		t.Errorf("restored NextExpiry = %v %v", when, ok)
	}
	// The restored engine issues versions after everything it holds.
	r = &Request{Payload: cmd("SET", "c", "3")}
	r.SetUserProperty("__ts", "1696374425000:0:c")
	if out := apply(t, e2, prepare(t, e2, t0, r), t0); out.Reply.Version != (HLC{1696374425000, 4, "StateStore"}) {
		t.Errorf("version after restore %v", out.Reply.Version)
	}
	// The cached reply survives: a redelivery is answered without the log.
	r = &Request{Payload: cmd("SET", "a", "1"), DedupKey: DedupKey([]byte("A"), "rt"), DedupTTL: 10 * time.Second}
	if _, out, needsLog := e2.Prepare(r, t0); needsLog || string(out.Reply.Payload) != "+OK\r\n" || out.Reply.Version.Counter != 1 {
		t.Errorf("cached reply after restore: %q %v %v", out.Reply.Payload, out.Reply.Version, needsLog)
	}
	// The same snapshot as builds before dedup ids wrote it, the dedup
	// key itself as CACHE KEY, restores to the same state: the cached
	// reply answers the redelivery.
	old := strings.Replace(want, "00000011"+"01"+"77468b60861a3cb3ce008aa4e31ebcf7", "0000000b"+"0000000141000000027274", 1)
	old = old[:len(old)-8] + "a979d774"
	oldBytes, _ := hex.DecodeString(old)
	e3 := mustEngine(t, Options{})
	if err := e3.Restore(bytes.NewReader(oldBytes)); err != nil {
		t.Fatalf("restore an older build's snapshot: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, e3), got) {
		t.Error("an older build's snapshot restored differs")
	}
	if _, out, needsLog := e3.Prepare(r, t0); needsLog || string(out.Reply.Payload) != "+OK\r\n" || out.Reply.Version.Counter != 1 {
		t.Errorf("cached reply after restoring an older build's snapshot: %q %v %v", out.Reply.Payload, out.Reply.Version, needsLog)
	}
}

// Truncated, flipped, extended or foreign snapshots are refused with
// ErrCorrupt (or ErrUnsupportedFormat), and the engine keeps its state.
func TestStateStoreSnapshotCorruption(t *testing.T) {
	src := scriptedEngine(t, 200, 1)
	good := snapshotBytes(t, src)
	e := scriptedEngine(t, 50, 2)
	before := snapshotBytes(t, e)
	step := 1
	if testing.Short() {
		step = 7
	}
	for i := 0; i < len(good); i += step {
		if err := e.Restore(bytes.NewReader(good[:i])); !isCorrupt(err) {
			t.Fatalf("prefix %d: %v", i, err)
		}
		b := append([]byte(nil), good...)
		b[i] ^= 0x10
		if err := e.Restore(bytes.NewReader(b)); !isCorrupt(err) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	if err := e.Restore(bytes.NewReader(append(append([]byte(nil), good...), 0))); !isCorrupt(err) {
		t.Errorf("trailing byte: %v", err)
	}
	b := append([]byte(nil), good...)
	b[11] = 2
	if err := e.Restore(bytes.NewReader(b)); !errors.Is(err, ErrUnsupportedFormat) {
		t.Errorf("format 2: %v", err)
	}
	readErr := errors.New("disk on fire")
	if err := e.Restore(iotest.ErrReader(readErr)); !errors.Is(err, readErr) {
		t.Errorf("reader error: %v", err)
	}
	if err := e.Restore(iotest.OneByteReader(bytes.NewReader(good))); err != nil {
		t.Errorf("one-byte reads: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, e), good) {
		t.Error("successful restore did not take the state")
	}
	e = scriptedEngine(t, 50, 2)
	for i := 0; i < len(good); i += 13 {
		_ = e.Restore(bytes.NewReader(good[:i]))
	}
	if !bytes.Equal(snapshotBytes(t, e), before) {
		t.Error("a failed restore changed the engine")
	}
	// A failing writer is reported.
	if err := src.Snapshot(failWriter{}); err == nil {
		t.Error("Snapshot to a failing writer succeeded")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

// scripted builds a deterministic log of n mutations (sets with and
// without expiry, conditional sets, deletes, fenced writes, expire ticks)
// with store times, from a seed.
type logRecord struct {
	entry []byte
	at    time.Time
}

func scriptedLog(t testing.TB, n int, seed uint64) []logRecord {
	t.Helper()
	e := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
	rng := newRand(seed)
	now := t0
	var log []logRecord
	for len(log) < n {
		now = now.Add(time.Duration(rng.intn(40)) * time.Millisecond)
		if rng.intn(10) == 0 {
			if entry, ok := e.PrepareExpire(now); ok {
				log = append(log, logRecord{entry, now})
				apply(t, e, entry, now)
			}
			continue
		}
		r := randomRequest(rng, now)
		entry, _, needsLog := e.Prepare(r, now)
		if !needsLog {
			continue
		}
		at := now.Add(time.Duration(rng.intn(3)) * time.Millisecond) // store time a little after
		log = append(log, logRecord{entry, at})
		apply(t, e, entry, at)
	}
	return log
}

func scriptedEngine(t testing.TB, n int, seed uint64) *Engine {
	e := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
	for _, r := range scriptedLog(t, n, seed) {
		apply(t, e, r.entry, r.at)
	}
	return e
}

// applyLogTwice applies log to two new engines, the first through Apply
// and the second through applyB, and fails unless every reply (payload,
// version, notifications) and the final snapshots are the same. It
// returns the first engine.
func applyLogTwice(t *testing.T, log []logRecord, applyB func(*Engine, []byte, time.Time) (Outcome, error)) *Engine {
	t.Helper()
	a := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
	b := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
	for i, r := range log {
		oa := apply(t, a, r.entry, r.at)
		ob, err := applyB(b, r.entry, r.at)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !bytes.Equal(oa.Reply.Payload, ob.Reply.Payload) || oa.Reply.Version != ob.Reply.Version || len(oa.Notifications) != len(ob.Notifications) {
			t.Fatalf("entry %d: replies differ: %q %v / %q %v", i, oa.Reply.Payload, oa.Reply.Version, ob.Reply.Payload, ob.Reply.Version)
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("two engines applying one log differ")
	}
	return a
}

// Applying the same log to two engines gives identical snapshots and
// replies; a snapshot taken anywhere plus the rest of the log gives the
// same result as the full log.
func TestStateStoreSnapshotReplayDeterminism(t *testing.T) {
	log := scriptedLog(t, 600, 42)
	a := applyLogTwice(t, log, (*Engine).Apply)
	full := snapshotBytes(t, a)
	st := a.Stats()
	if st.Keys == 0 || st.History == 0 || st.HistoryMin.IsZero() || st.Cached == 0 {
		t.Fatalf("the log does not exercise the state: %+v", st)
	}
	for _, cut := range []int{0, 1, 37, 300, 599, 600} {
		c := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
		for _, r := range log[:cut] {
			apply(t, c, r.entry, r.at)
		}
		snap := snapshotBytes(t, c)
		d := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
		if err := d.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		for _, r := range log[cut:] {
			apply(t, d, r.entry, r.at)
		}
		if !bytes.Equal(snapshotBytes(t, d), full) {
			t.Errorf("snapshot at %d + replay differs from the full replay", cut)
		}
	}
}

// TestStateStoreSnapshotFreeze: a frozen state writes the snapshot of the
// instant it was taken, whatever the engine applied after (keys set,
// overwritten, deleted and expired, history and response cache entries
// pushed out), and the engine answers meanwhile (Freeze holds its lock
// only for the copy).
func TestStateStoreSnapshotFreeze(t *testing.T) {
	log := scriptedLog(t, 600, 7)
	e := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
	for _, r := range log[:300] {
		apply(t, e, r.entry, r.at)
	}
	want := snapshotBytes(t, e)
	f := e.Freeze()
	for _, r := range log[300:] {
		apply(t, e, r.entry, r.at)
	}
	var got bytes.Buffer
	n, err := f.WriteTo(&got)
	if err != nil || n != int64(got.Len()) {
		t.Fatalf("WriteTo: %d bytes, err %v (wrote %d)", n, err, got.Len())
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the frozen state's snapshot differs from the snapshot taken when it was frozen")
	}
	if bytes.Equal(snapshotBytes(t, e), want) {
		t.Fatal("the log's second half changed nothing: the test proves nothing")
	}
	// A restored frozen state goes on like the engine it came from.
	r := mustEngine(t, Options{HistoryLen: 40, DedupLen: 16})
	if err := r.Restore(bytes.NewReader(got.Bytes())); err != nil {
		t.Fatal(err)
	}
	for _, rec := range log[300:] {
		apply(t, r, rec.entry, rec.at)
	}
	if !bytes.Equal(snapshotBytes(t, r), snapshotBytes(t, e)) {
		t.Fatal("restored frozen state and the engine diverge over the same entries")
	}
}
