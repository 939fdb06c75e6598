package broker

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/smartgo/smartgo/internal/testutil"
)

// The bytes of a spare frame (configspare.go), pinned.
func TestBrokerSpareFramePinned(t *testing.T) {
	got := appendSpareFrame(nil, 2, 0x01020304, []byte(`{}`))
	want := "5347535041524531" + // "SGSPARE1"
		"0200000000000000" + // seq 2
		"04030201" + // base
		"02000000" + // length 2
		"e161d814" + // CRC-32C of bytes 8..24 and the JSON (checked with an independent bitwise CRC-32C)
		"7b7d" // {}
	if h := hex.EncodeToString(got); h != want {
		t.Fatalf("frame %s, want %s", h, want)
	}
	seq, payload, ok := decodeSpareFrame(append(got, make([]byte, 10)...), 0x01020304)
	if !ok || seq != 2 || string(payload) != "{}" {
		t.Fatalf("decoded %d %q %v", seq, payload, ok)
	}
	if _, _, ok := decodeSpareFrame(got, 0x01020305); ok {
		t.Fatal("a frame of another file's bytes was taken")
	}
	for i := range got {
		bad := append([]byte(nil), got...)
		bad[i] ^= 0x40
		if _, _, ok := decodeSpareFrame(bad, 0x01020304); ok {
			t.Fatalf("a frame with byte %d flipped was taken", i)
		}
	}
}

// FuzzBrokerSpareFrame: any bytes in a spare slot decode without a panic,
// and a frame that decodes re-encodes to the same bytes.
func FuzzBrokerSpareFrame(f *testing.F) {
	f.Add(appendSpareFrame(nil, 1, 7, []byte(`{"offsetTable":{}}`)), uint32(7))
	f.Add([]byte("SGSPARE1"), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, base uint32) {
		seq, payload, ok := decodeSpareFrame(b, base)
		if !ok {
			return
		}
		if re := appendSpareFrame(nil, seq, base, payload); string(re) != string(b[:len(re)]) {
			t.Fatalf("frame %x re-encodes to %x", b, re)
		}
	})
}

// Consumer and delay offsets saved on a disk filled to its last page (a
// small tmpfs) go into the files' spares: Persist says so with
// ErrSavedInSpare, a reopen reads them from there, a crash in the middle
// of a later save into the spare leaves the save before it, and once
// space frees the next Persist writes the file and the spare's frames
// are stale.
func TestBrokerOffsetsSavedInSpareOnFullDisk(t *testing.T) {
	disk := testutil.MountTmpfs(t, "4m")
	dir := filepath.Join(disk, "config")
	m, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Commit("g", "T", 0, 10)
	d.Set(1, 3)
	if err := errors.Join(m.Persist(), d.Persist()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ConsumerOffsetFile, DelayOffsetFile} {
		if st, err := os.Stat(filepath.Join(dir, name+spareSuffix)); err != nil || st.Size() != 2*spareMinSlot {
			t.Fatalf("spare of %s: %v %v", name, st, err)
		}
	}
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)

	m.Commit("g", "T", 0, 20)
	d.Set(1, 4)
	for _, err := range []error{m.Persist(), d.Persist()} {
		if !errors.Is(err, ErrSavedInSpare) {
			t.Fatalf("Persist on the full disk: %v, want ErrSavedInSpare", err)
		}
	}
	m.Commit("g", "T", 0, 30) // the second slot
	if err := m.Persist(); !errors.Is(err, ErrSavedInSpare) {
		t.Fatal(err)
	}
	m2, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := m2.Query("g", "T", 0); o != 30 || !m2.fromSpare {
		t.Fatalf("reopened on the full disk: offset %d (from spare %v), want 30", o, m2.fromSpare)
	}
	if o := d2.Get(1); o != 4 || !d2.fromSpare {
		t.Fatalf("reopened delay offset %d (from spare %v), want 4", o, d2.fromSpare)
	}
	// A save torn by a crash: its slot's frame fails its CRC, the one
	// before it is read.
	spare := filepath.Join(dir, ConsumerOffsetFile+spareSuffix)
	f, err := os.OpenFile(spare, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, spareMinSlot+spareHeader+3); err != nil { // the second slot's JSON
		t.Fatal(err)
	}
	f.Close()
	if m3, err := OpenOffsets(dir); err != nil {
		t.Fatal(err)
	} else if o, _ := m3.Query("g", "T", 0); o != 20 {
		t.Fatalf("after a torn save into the spare: offset %d, want 20 (the save before)", o)
	}

	// Space frees: the file takes the table, and the spare is stale.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	m2.Commit("g", "T", 1, 5)
	if err := m2.Persist(); err != nil {
		t.Fatal(err)
	}
	m4, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := m4.Query("g", "T", 0); o != 30 || m4.fromSpare {
		t.Fatalf("after space freed: offset %d (from spare %v), want 30 from the file", o, m4.fromSpare)
	}
	if o, _ := m4.Query("g", "T", 1); o != 5 {
		t.Fatalf("after space freed: queue 1 at %d, want 5", o)
	}
}
