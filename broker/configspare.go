package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/smartgo/smartgo/internal/fsutil"
)

// Spare files. consumerOffset.json and delayOffset.json hold what nothing
// rebuilds: the offsets consumers committed and the delay levels'
// progress. Each is replaced by a new file renamed over it, which needs
// free blocks; on a disk another process filled to its last page that
// save fails, and everything committed since the last save that reached
// the disk would be lost at the stop (delivered again after the restart).
// So each has a spare, <name>.spare next to it, whose blocks are written
// when the broker opens the file (and again, larger, when the file
// outgrows it). A save that cannot replace the file writes its JSON into
// the spare in place, which needs no new block, and the next open takes
// it when it is newer than the file.
//
// Layout: two slots of slotSize bytes each (the file is 2*slotSize long);
// a save goes to the slot not holding the newest frame, so a save torn by
// a crash leaves the one before it whole. A slot holds one frame, all
// integers little-endian:
//
//	0   magic    8 bytes  "SGSPARE1"; zero bytes: an empty slot
//	8   seq      uint64   counts saves into this spare; the higher wins
//	16  base     uint32   CRC-32C of the file's bytes when the frame was written
//	20  length   uint32   bytes of JSON
//	24  crc      uint32   CRC-32C of bytes 8..24 and of the JSON
//	28  JSON     length bytes, the file's content
//
// A frame counts only when its CRC matches and its base is the CRC-32C of
// the file as it is now: once the file is replaced by a later save, every
// frame written before is stale.

// spareMagic begins every frame of a spare file.
const spareMagic = "SGSPARE1"

const (
	spareHeader  = 28
	spareMinSlot = 64 << 10 // a slot's least size
)

// spareSuffix names a file's spare: consumerOffset.json.spare.
const spareSuffix = ".spare"

// ErrSavedInSpare is wrapped by the error of a Persist that could not
// replace its file (a full disk) and wrote its content into the file's
// spare instead: nothing is lost, and the next open reads it from there.
var ErrSavedInSpare = errors.New("broker: kept in the spare file")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// spareFile is the spare of one metadata file. Not safe for concurrent
// use: its owner's persistMu serialises it.
type spareFile struct {
	path string
	slot int64  // bytes per slot, 0 when the spare could not be made
	seq  uint64 // the newest frame's
	next int    // the slot the next frame goes to
	live bool   // a frame may match the file: clear it once the file is replaced
	base uint32 // CRC-32C of the file's bytes as last read or written
}

// openSpare reads the spare of the file at path, whose bytes are data
// (nil when there is none), and makes its blocks. It returns the newer
// content kept in the spare, nil when there is none. A spare that cannot
// be made (a full or read-only disk) is no error: saves then fail as
// they did without one.
func openSpare(path string, data []byte) (*spareFile, []byte, error) {
	sp := &spareFile{path: path + spareSuffix, base: crc32.Checksum(data, castagnoli)}
	raw, err := os.ReadFile(sp.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("broker: read %s: %w", sp.path, err)
	}
	var kept []byte
	if n := int64(len(raw)) / 2; n >= spareHeader && int64(len(raw)) == 2*n {
		sp.slot = n
		for i := range 2 {
			seq, payload, ok := decodeSpareFrame(raw[int64(i)*n:int64(i+1)*n], sp.base)
			if !ok {
				continue
			}
			if kept == nil || seq > sp.seq {
				sp.seq, kept, sp.next = seq, payload, 1-i
			}
			sp.live = true
		}
	}
	if kept == nil {
		_ = sp.grow(len(data)) // best effort; it is made again at the next save
	}
	return sp, kept, nil
}

// decodeSpareFrame returns a slot's frame when it is whole and its base
// is base.
func decodeSpareFrame(b []byte, base uint32) (seq uint64, payload []byte, ok bool) {
	if len(b) < spareHeader || string(b[:8]) != spareMagic {
		return 0, nil, false
	}
	n := int(binary.LittleEndian.Uint32(b[20:]))
	if n > len(b)-spareHeader || binary.LittleEndian.Uint32(b[16:]) != base {
		return 0, nil, false
	}
	crc := crc32.Update(crc32.Checksum(b[8:24], castagnoli), castagnoli, b[spareHeader:spareHeader+n])
	if crc != binary.LittleEndian.Uint32(b[24:]) {
		return 0, nil, false
	}
	return binary.LittleEndian.Uint64(b[8:]), b[spareHeader : spareHeader+n], true
}

// appendSpareFrame appends the frame of payload to dst.
func appendSpareFrame(dst []byte, seq uint64, base uint32, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, spareMagic...)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint32(dst, base)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(dst[start+8:], castagnoli), castagnoli, payload)
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	return append(dst, payload...)
}

// slotFor is the slot size a file of n bytes wants: room for twice its
// content, at least spareMinSlot, in whole 4 KiB pages.
func slotFor(n int) int64 {
	s := max(int64(spareHeader+2*n), spareMinSlot)
	return (s + 4095) &^ 4095
}

// grow makes the spare, its blocks written with zeros, when it is
// missing or too small for a file of n bytes. It replaces the spare, so
// it runs only while no frame in it is needed (the file was just
// replaced, or the spare holds none).
func (sp *spareFile) grow(n int) error {
	if sp.slot >= int64(spareHeader+n+n/2) { // room left to grow into
		return nil
	}
	want := slotFor(n)
	err := fsutil.WriteFileAtomicFunc(sp.path, 0o644, func(w io.Writer) error {
		_, err := w.Write(make([]byte, 2*want))
		return err
	})
	if err != nil {
		return fmt.Errorf("broker: make %s: %w", filepath.Base(sp.path), err)
	}
	sp.slot, sp.seq, sp.next, sp.live = want, 0, 0, false
	return nil
}

// saved notes that the file now holds data: frames written before are
// stale (their base no longer matches). The spare grows for data if it
// must; the file is safe, so that may fail.
func (sp *spareFile) saved(data []byte) {
	sp.base = crc32.Checksum(data, castagnoli)
	if sp.live {
		// Stale already by their base; cleared too, so that a file
		// later written back to the same bytes cannot revive them.
		if f, err := os.OpenFile(sp.path, os.O_WRONLY, 0); err == nil {
			zero := make([]byte, 8)
			_, err1 := f.WriteAt(zero, 0)
			_, err2 := f.WriteAt(zero, sp.slot)
			if err1 == nil && err2 == nil && f.Sync() == nil {
				sp.live = false
			}
			_ = f.Close()
		}
	}
	_ = sp.grow(len(data))
}

// write keeps data, the file's content the file could not take, in the
// spare: in place, synced.
func (sp *spareFile) write(data []byte) error {
	if sp.slot < int64(spareHeader+len(data)) {
		if sp.slot > 0 {
			return fmt.Errorf("broker: %s: %d bytes do not fit its slots of %d", filepath.Base(sp.path), len(data), sp.slot)
		}
		return fmt.Errorf("broker: %s was not made", filepath.Base(sp.path))
	}
	f, err := os.OpenFile(sp.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("broker: open %s: %w", filepath.Base(sp.path), err)
	}
	defer f.Close()
	frame := appendSpareFrame(make([]byte, 0, spareHeader+len(data)), sp.seq+1, sp.base, data)
	if _, err := f.WriteAt(frame, int64(sp.next)*sp.slot); err != nil {
		return fmt.Errorf("broker: write %s: %w", filepath.Base(sp.path), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("broker: fsync %s: %w", filepath.Base(sp.path), err)
	}
	sp.seq++
	sp.next = 1 - sp.next
	sp.live = true
	return nil
}

// readConfigSpare is readConfig for a file with a spare: the content the
// spare keeps when it is newer than the file (fromSpare), else the
// file's. The spare is returned for the owner's saves.
func readConfigSpare(path string, v any) (found, fromSpare bool, sp *spareFile, err error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, false, nil, fmt.Errorf("broker: read %s: %w", path, err)
	}
	if err == nil && len(data) == 0 {
		// Damage (readConfig): not a missing file, whatever the spare says.
		_, err = readConfig(path, v)
		return false, false, nil, err
	}
	sp, kept, err := openSpare(path, data)
	if err != nil {
		return false, false, nil, err
	}
	if kept != nil {
		if err := decodeConfig(path+spareSuffix, kept, v); err != nil {
			return false, false, nil, err
		}
		return true, true, sp, nil
	}
	found, err = readConfig(path, v)
	return found, false, sp, err
}

// persistSpare replaces the file at path with v's JSON, or, when that
// fails, keeps the JSON in sp: the error then wraps ErrSavedInSpare and
// says why the file could not be replaced.
func persistSpare(path string, sp *spareFile, v any) error {
	data, err := encodeConfig(path, v)
	if err != nil {
		return err
	}
	err = writeConfigData(path, data)
	if err == nil {
		sp.saved(data)
		return nil
	}
	if serr := sp.write(data); serr != nil {
		return fmt.Errorf("%w (nor in its spare: %v)", err, serr)
	}
	return fmt.Errorf("%w %s: %s could not be replaced: %w", ErrSavedInSpare, filepath.Base(sp.path), filepath.Base(path), err)
}
