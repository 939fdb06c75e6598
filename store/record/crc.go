package record

import (
	"encoding/binary"
	"hash/crc32"
)

// checksumIEEE is crc32.ChecksumIEEE. The standard library hashes a long
// input with carry-less multiplication 16 bytes at a time and the up to
// 15 bytes left over one at a time, each step waiting for the last: for a
// record's CRC that tail cost more than half of the pass over its kilobyte
// (perf of the broker). Here the tail is hashed by tailTabs, one
// independent table lookup per byte.
func checksumIEEE(p []byte) uint32 {
	n := len(p) &^ 15
	if n < 64 || n == len(p) {
		return crc32.ChecksumIEEE(p)
	}
	return ^crcTail(^crc32.ChecksumIEEE(p[:n]), p[n:])
}

// tailTabs[k][b] is the CRC-32 (IEEE, reflected, register starting at
// zero) of byte b followed by k zero bytes.
var tailTabs = func() (t [16][256]uint32) {
	for b := range 256 {
		c := uint32(b)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ crc32.IEEE
			} else {
				c >>= 1
			}
		}
		t[0][b] = c
	}
	for k := 1; k < len(t); k++ {
		for b := range 256 {
			c := t[k-1][b]
			t[k][b] = c>>8 ^ t[0][c&0xFF]
		}
	}
	return t
}()

// crcTail advances the CRC register crc (not inverted) over p, at most 16
// bytes: the register's four bytes are folded into p's first four, and
// each byte's share of the result comes from the table of the bytes that
// follow it, so no lookup waits for another.
func crcTail(crc uint32, p []byte) uint32 {
	n := len(p)
	var x [4]byte
	binary.LittleEndian.PutUint32(x[:], crc)
	var r uint32
	if n < 4 {
		r = crc >> (8 * n)
	}
	for i, b := range p {
		if i < 4 {
			b ^= x[i]
		}
		r ^= tailTabs[n-1-i][b]
	}
	return r
}
